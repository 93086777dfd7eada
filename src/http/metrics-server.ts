import { createServer, type Server } from 'node:http';
import type { Config } from '../config.ts';
import { type Metrics, metricsAccess } from '../lib/metrics.ts';

/**
 * A separate `tourops worker`'s /metrics on WORKER_METRICS_PORT (HOST), with the same access
 * rule as the API's: METRICS_TOKEN when set, else loopback binds only. Resolves once listening.
 */
export async function startMetricsServer(config: Config, metrics: Metrics): Promise<Server> {
  const access = metricsAccess(config.metrics.token, config.host);
  const server = createServer((request, response) => {
    const path = (request.url ?? '').split('?')[0];
    const allowed = access(request.headers.authorization);
    if (request.method !== 'GET' || path !== '/metrics' || allowed === 'hidden') {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    if (allowed === 'unauthorized') {
      response.writeHead(401, { 'www-authenticate': 'Bearer' }).end();
      return;
    }
    metrics.render().then(
      (text) => response.writeHead(200, { 'content-type': metrics.contentType }).end(text),
      () => response.writeHead(500).end(),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.metrics.workerPort ?? 0, config.host, () => resolve());
  });
  return server;
}
