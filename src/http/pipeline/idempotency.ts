import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiProblem } from '../../lib/problems.ts';
import type { StoredAnswer } from '../../repositories/idempotency-repository.ts';
import { IdempotencyService, type KeyedWrite } from '../../services/idempotency-service.ts';
import { callerOf } from './auth.ts';
import { PROBLEM_CONTENT_TYPE, problemBody } from './problem-reply.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** A write with an Idempotency-Key whose answer no one has stored yet (see Writes). */
    keyedWrite: KeyedWrite | null;
  }
}

const WRITE_METHODS = new Set(['POST', 'PATCH', 'DELETE']);
const PURGE_EVERY_MS = 10 * 60_000;
const JSON_TYPE = 'application/json; charset=utf-8';

/** What a write route answers: a status and the body its response schema serializes. */
export interface WriteAnswer {
  status: number;
  body?: unknown;
}

/**
 * The unit of work of every write route under /api/v1. A route first does what needs no
 * database (resolving a webhook URL, say), then hands the rest to `run`, which, for a request
 * with an Idempotency-Key, locks the key, runs the service call in the transaction that locked it,
 * stores the serialized answer and commits, in that order (IdempotencyService.run); without a
 * key it runs the call alone.
 */
export class Writes {
  constructor(
    private readonly service: IdempotencyService,
    private readonly errorsBaseUrl: string,
  ) {}

  async run(
    request: FastifyRequest,
    reply: FastifyReply,
    work: () => Promise<WriteAnswer>,
  ): Promise<FastifyReply> {
    const write = takeWrite(request);
    if (write === null) {
      const answer = await work();
      return reply.code(answer.status).send(answer.body);
    }
    const { answer, replayed } = await this.service.run(write, async () => {
      try {
        return this.serialized(reply, await work());
      } catch (error) {
        if (!(error instanceof ApiProblem)) throw error;
        // A refusal is the endpoint's answer too: stored, and replayed like a success.
        return rendered(error, reply, this.errorsBaseUrl);
      }
    });
    return sendStored(reply, answer, replayed);
  }

  /** The bytes the client gets, serialized by the route's response schema for the status. */
  private serialized(reply: FastifyReply, answer: WriteAnswer): StoredAnswer {
    reply.code(answer.status);
    if (answer.body === undefined) return { status: answer.status, type: null, body: '' };
    // The routes' serializers are JSON ones: they return text.
    const body = reply.serialize(answer.body) as string;
    return { status: answer.status, type: JSON_TYPE, body };
  }
}

/**
 * The hooks of Idempotency-Key: once the body is parsed, and before it is validated, the
 * request's key and fingerprint are read (422 for a malformed key); an answer given before the
 * route's unit of work (a 422 of the body, the token's 403, a failed check) answers the key from
 * onSend: stored like the route's own, or, when a finished request holds the key, replaced by
 * that request's answer. Locking the key is the route's own (Writes.run). Must be registered before
 * the routes.
 */
export function registerIdempotency(
  app: FastifyInstance,
  service: IdempotencyService,
  errorsBaseUrl: string,
): void {
  app.decorateRequest('keyedWrite', null);

  // Expired keys are purged in the background; a reused expired key is also freed when it is
  // locked again.
  // Closing stops a purge between its statements.
  const closing = new AbortController();
  let purging: Promise<unknown> | null = null;
  const purge = () => {
    purging ??= service
      .purgeExpired({ signal: closing.signal })
      .catch((error) => app.log.warn({ err: error }, 'idempotency purge failed'))
      .finally(() => {
        purging = null;
      });
  };
  const timer = setInterval(purge, PURGE_EVERY_MS);
  timer.unref();
  app.addHook('onClose', async () => {
    clearInterval(timer);
    closing.abort();
    await purging;
  });

  // A callback hook: it runs on every request, and needs no promise.
  app.addHook('preValidation', (request, _reply, done) => {
    const key = request.headers['idempotency-key'];
    if (key === undefined || !WRITE_METHODS.has(request.method)) {
      done();
      return;
    }
    try {
      service.assertValidKey(key);
    } catch (error) {
      done(error as Error);
      return;
    }
    const body = request.body === undefined ? '' : JSON.stringify(request.body);
    request.keyedWrite = {
      tenantId: callerOf(request).tenant.id,
      key,
      fingerprint: IdempotencyService.fingerprint(request.method, request.url, body),
    };
    done();
  });

  app.addHook('onSend', async (request, reply, payload) => {
    const write = takeWrite(request);
    if (write === null || typeof payload !== 'string') return payload;
    const type = reply.getHeader('content-type');
    const given = {
      status: reply.statusCode,
      type: typeof type === 'string' ? type : null,
      body: payload,
    };
    let outcome: { answer: StoredAnswer; replayed: boolean };
    try {
      // The token's refusal is never replaced: a stored answer is for callers allowed to make
      // the request (it can hold a signing key).
      outcome = await service.answerEarly(write, given, request.refusal === null);
    } catch (error) {
      if (!(error instanceof ApiProblem)) throw error;
      outcome = { answer: rendered(error, reply, errorsBaseUrl), replayed: false };
    }
    // Another answer than the one given: set out as it was stored.
    return outcome.answer === given ? payload : setOut(reply, outcome.answer, outcome.replayed);
  });
}

/** A problem as the bytes of an answer (its headers set on the reply). */
function rendered(problem: ApiProblem, reply: FastifyReply, errorsBaseUrl: string): StoredAnswer {
  for (const [name, value] of Object.entries(problem.headers)) reply.header(name, value);
  return {
    status: problem.status,
    type: PROBLEM_CONTENT_TYPE,
    body: problemBody(problem, errorsBaseUrl),
  };
}

function sendStored(reply: FastifyReply, answer: StoredAnswer, replayed: boolean): FastifyReply {
  return reply.send(setOut(reply, answer, replayed));
}

/** Sets the reply's status and headers for a stored answer; its body. */
function setOut(reply: FastifyReply, answer: StoredAnswer, replayed: boolean): string {
  if (replayed) reply.header('Idempotency-Replayed', 'true');
  reply.code(answer.status);
  if (answer.type) reply.type(answer.type);
  return answer.body;
}

/** The request's keyed write, taken off it so that exactly one place answers it. */
function takeWrite(request: FastifyRequest): KeyedWrite | null {
  const write = request.keyedWrite;
  request.keyedWrite = null;
  return write;
}
