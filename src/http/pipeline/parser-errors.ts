import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import { ApiProblem, notFound, validationFailed } from '../../lib/problems.ts';
import { PROBLEM_CONTENT_TYPE, problemBody } from './problem-reply.ts';

/** What the HTTP parser rejected, as the problem the API answers for it. */
function problemFor(error: NodeJS.ErrnoException): ApiProblem {
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW':
      return new ApiProblem(
        'headers-too-large',
        'The request line and headers together exceed 16 KB.',
      );
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new ApiProblem('request-timeout', 'The request did not arrive in time.');
    case 'HPE_INVALID_METHOD':
      // Like any other method the API does not route (404, never 405).
      return notFound('The route');
    default:
      return validationFailed(
        { request: ['is not a valid HTTP/1.1 request'] },
        'The request could not be parsed as HTTP/1.1.',
      );
  }
}

/**
 * Node's `clientError`: the parser gave up before any route ran, so no hook can answer. The answer
 * is still a problem with a request id, and says `Connection: close` because the connection ends
 * with it (a keep-alive client must not send its next request into a reset).
 */
export function answerParserError(
  error: NodeJS.ErrnoException,
  socket: Socket,
  errorsBaseUrl: string,
): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const requestId = randomUUID();
  const problem = problemFor(error);
  const body = problemBody(problem, errorsBaseUrl);
  const head = [
    `HTTP/1.1 ${problem.status} ${STATUS_TEXT[problem.status] ?? 'Error'}`,
    `Content-Type: ${PROBLEM_CONTENT_TYPE}; charset=utf-8`,
    `Content-Length: ${Buffer.byteLength(body)}`,
    `Service-Request-Id: ${requestId}`,
    'Connection: close',
  ];
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
  // A client that keeps sending cannot hold the socket open.
  setTimeout(() => socket.destroy(), 2_000).unref();
}

const STATUS_TEXT: Record<number, string> = {
  404: 'Not Found',
  408: 'Request Timeout',
  422: 'Unprocessable Entity',
  431: 'Request Header Fields Too Large',
};
