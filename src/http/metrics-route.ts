import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config.ts';
import { type Metrics, metricsAccess } from '../lib/metrics.ts';
import { notFound, unauthorized } from '../lib/problems.ts';

/** `GET /metrics`: the Prometheus text exposition of this process's metrics. */
export function registerMetricsRoute(app: FastifyInstance, config: Config, metrics: Metrics): void {
  const access = metricsAccess(config.metrics.token, config.host);
  app.get(
    '/metrics',
    { schema: { hide: true } },
    async (request: FastifyRequest, reply: FastifyReply) => {
      const allowed = access(request.headers.authorization);
      if (allowed === 'hidden') throw notFound('The route');
      if (allowed === 'unauthorized') throw unauthorized('The metrics token is missing or wrong.');
      return reply.type(metrics.contentType).send(await metrics.render());
    },
  );
}
