import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { IdempotencyService } from '../services/idempotency-service.ts';
import { callerOf } from './auth.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set when this request claimed its Idempotency-Key and must record its answer. */
    idempotencyKey: string | null;
  }
}

const WRITE_METHODS = new Set(['POST', 'PATCH', 'DELETE']);
const PURGE_EVERY_MS = 10 * 60_000;

/**
 * Idempotency-Key on every write under /api/v1. The claim happens once the body is parsed and
 * before it is validated, so a 422 is the endpoint's answer too and is replayed like any other.
 */
export function registerIdempotency(app: FastifyInstance, service: IdempotencyService): void {
  app.decorateRequest('idempotencyKey', null);

  // Expired keys are purged in the background; a reused expired key is also freed by its claim.
  const purge = () =>
    service
      .purgeExpired()
      .catch((error) => app.log.warn({ err: error }, 'idempotency purge failed'));
  const timer = setInterval(purge, PURGE_EVERY_MS);
  timer.unref();
  app.addHook('onClose', async () => clearInterval(timer));

  app.addHook('preValidation', async (request: FastifyRequest, reply: FastifyReply) => {
    const header = request.headers['idempotency-key'];
    if (header === undefined || !WRITE_METHODS.has(request.method)) return;
    service.assertValidKey(header);
    const tenantId = callerOf(request).tenant.id;
    const body = request.body === undefined ? '' : JSON.stringify(request.body);
    const fingerprint = IdempotencyService.fingerprint(request.method, request.url, body);
    const start = await service.start(tenantId, header, fingerprint);
    if (start.kind === 'execute') {
      request.idempotencyKey = header;
      return;
    }
    const { status, type, body: stored } = start.response;
    reply.header('Idempotency-Replayed', 'true').code(status);
    if (type) reply.type(type);
    return reply.send(stored);
  });

  app.addHook('onSend', async (request, reply, payload) => {
    const key = request.idempotencyKey;
    if (key === null) return payload;
    request.idempotencyKey = null;
    const tenantId = callerOf(request).tenant.id;
    const body =
      typeof payload === 'string'
        ? payload
        : Buffer.isBuffer(payload)
          ? payload.toString('utf8')
          : null;
    if (body === null) {
      await service.release(tenantId, key);
    } else {
      const type = reply.getHeader('content-type');
      await service.finish(tenantId, key, {
        status: reply.statusCode,
        type: typeof type === 'string' ? type : null,
        body,
      });
    }
    return payload;
  });
}
