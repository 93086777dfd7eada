import type { FastifyPluginAsync } from 'fastify';
import { sql } from 'kysely';
import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import type { Metrics } from '../lib/metrics.ts';
import { serviceUnavailable } from '../lib/problems.ts';
import type { OutageLog } from './pipeline/outage-log.ts';
import { sendProblem } from './pipeline/problem-reply.ts';
import { PROBE_DRAINING, withinProbeTime } from './probe-server.ts';

/**
 * Liveness and readiness, outside /api/v1 and without authentication. A ready answer also says
 * what the delivery queue holds (the metrics' figures): work stuck in flight shows there too.
 * A process on its way out (SHUTDOWN_DRAIN, then the close) is not ready, whatever the database
 * says: that 503 is what takes it out of a load balancer while it still answers.
 */
export const healthRoutes: FastifyPluginAsync<{
  database: Database;
  config: Config;
  outage: OutageLog;
  metrics: Metrics;
  draining: () => boolean;
}> = async (app, { database, config, outage, metrics, draining }) => {
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { hide: true } }, async (_request, reply) => {
    if (draining()) return reply.code(503).send(PROBE_DRAINING.body);
    try {
      const [, queue] = await withinProbeTime(
        Promise.all([sql`select 1`.execute(database.db), metrics.queueStats()]),
      );
      if (queue === null) return { status: 'ok' };
      const { pending, stuck, oldestDueAgeSeconds } = queue;
      return { status: 'ok', deliveries: { pending, stuck, oldestDueAgeSeconds } };
    } catch (error) {
      outage.failed(error);
      return sendProblem(reply, serviceUnavailable(), config.errorsBaseUrl);
    }
  });
};
