import type { FastifyInstance, FastifyReply, FastifyRequest, RouteHandlerMethod } from 'fastify';
import { type IdempotencyClaim, IdempotencyService } from '../services/idempotency-service.ts';
import { callerOf } from './auth.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * Set when this request claimed its Idempotency-Key and must record its answer; its
     * transaction is the one the handler runs in (the answer commits with it).
     */
    idempotencyClaim: IdempotencyClaim | null;
  }
}

const WRITE_METHODS = new Set(['POST', 'PATCH', 'DELETE']);
const PURGE_EVERY_MS = 10 * 60_000;

/**
 * Idempotency-Key on every write under /api/v1. The claim happens once the body is parsed and
 * before it is validated, so a 422 is the endpoint's answer too and is replayed like any other.
 * The claim opens the transaction the handler runs in and that also stores its answer (onSend),
 * so claim, side effect and record commit together. Must be registered before the routes.
 */
export function registerIdempotency(app: FastifyInstance, service: IdempotencyService): void {
  app.decorateRequest('idempotencyClaim', null);

  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (!methods.some((method) => WRITE_METHODS.has(method))) return;
    const handler = route.handler as RouteHandlerMethod;
    route.handler = function inTransaction(request, reply) {
      const claim = request.idempotencyClaim;
      if (!claim) return handler.call(this, request, reply);
      return claim.transaction.run(async () => handler.call(this, request, reply));
    };
  });

  // Whatever ended the request without onSend (an aborted connection): undo and free the key.
  const abandon = async (request: FastifyRequest) => {
    const claim = takeClaim(request);
    if (claim) await service.abandon(claim);
  };
  app.addHook('onResponse', abandon);
  app.addHook('onRequestAbort', abandon);

  // Expired keys are purged in the background; a reused expired key is also freed by its claim.
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

  app.addHook('preValidation', async (request: FastifyRequest, reply: FastifyReply) => {
    const header = request.headers['idempotency-key'];
    if (header === undefined || !WRITE_METHODS.has(request.method)) return;
    service.assertValidKey(header);
    const tenantId = callerOf(request).tenant.id;
    const body = request.body === undefined ? '' : JSON.stringify(request.body);
    const fingerprint = IdempotencyService.fingerprint(request.method, request.url, body);
    const start = await service.start(tenantId, header, fingerprint);
    if (start.kind === 'execute') {
      request.idempotencyClaim = start.claim;
      return;
    }
    const { status, type, body: stored } = start.response;
    reply.header('Idempotency-Replayed', 'true').code(status);
    if (type) reply.type(type);
    return reply.send(stored);
  });

  app.addHook('onSend', async (request, reply, payload) => {
    const claim = takeClaim(request);
    if (!claim) return payload;
    const body =
      payload === undefined || payload === null
        ? '' // 204
        : typeof payload === 'string'
          ? payload
          : Buffer.isBuffer(payload)
            ? payload.toString('utf8')
            : null;
    if (body === null) {
      // A stream: nothing to store byte for byte.
      await service.abandon(claim);
    } else {
      const type = reply.getHeader('content-type');
      const response = {
        status: reply.statusCode,
        type: typeof type === 'string' ? type : null,
        body,
      };
      await service.finish(claim, response);
    }
    return payload;
  });
}

/** The request's claim, taken off it so that exactly one hook settles it. */
function takeClaim(request: FastifyRequest): IdempotencyClaim | null {
  const claim = request.idempotencyClaim;
  request.idempotencyClaim = null;
  return claim;
}
