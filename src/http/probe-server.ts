import { createServer, type ServerResponse } from 'node:http';
import { sql } from 'kysely';
import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import { withDeadline } from '../lib/deadline.ts';
import { type Metrics, metricsAccess } from '../lib/metrics.ts';
import { ApiProblem, serviceUnavailable } from '../lib/problems.ts';
import { PROBLEM_CONTENT_TYPE, problemBody } from './pipeline/problem-reply.ts';

/** A readiness probe answers within this, whatever the database does. */
const READY_PROBE_MS = 1_000;

/** `work`, or a rejection once it has taken READY_PROBE_MS. */
export function withinProbeTime<T>(work: Promise<T>): Promise<T> {
  return withDeadline(work, READY_PROBE_MS, () => {
    throw new Error('readiness probe timed out');
  });
}

/** What a probe answers: 200 with a status, 503 with a status, or 503 with a problem. */
export type ProbeAnswer =
  | { status: 200 | 503; body: { status: string } }
  | { status: 503; problem: ApiProblem };

const PROBE_OK = { status: 200, body: { status: 'ok' } } satisfies ProbeAnswer;
export const PROBE_DRAINING = { status: 503, body: { status: 'draining' } } satisfies ProbeAnswer;
const PROBE_STARTING = { status: 503, body: { status: 'starting' } } satisfies ProbeAnswer;

/** 503 for a worker whose heartbeat is late: other workers may soon take its claims over. */
const heartbeatLate = () =>
  new ApiProblem(
    'service-unavailable',
    "This worker's heartbeat is late: its database writes are failing or its event loop is stalled.",
  );

/**
 * A `tourops worker`'s readiness: draining once it stops; 503 while it joins the registry, while
 * its heartbeat is late, or while its database does not answer within READY_PROBE_MS.
 */
export function workerReadiness(
  worker: { readinessAt(nowMs: number): 'running' | 'joining' | 'late' | 'draining' },
  database: Database,
): () => Promise<ProbeAnswer> {
  return async () => {
    const state = worker.readinessAt(Date.now());
    if (state === 'draining') return PROBE_DRAINING;
    if (state === 'joining') return PROBE_STARTING;
    if (state === 'late') return { status: 503, problem: heartbeatLate() };
    try {
      await withinProbeTime(sql`select 1`.execute(database.db));
      return PROBE_OK;
    } catch {
      return { status: 503, problem: serviceUnavailable() };
    }
  };
}

/** What answers once the process runs: readiness, and for a worker its /metrics. */
export interface ProbeSource {
  ready(): Promise<ProbeAnswer>;
  metrics?: Metrics;
}

/**
 * The probes outside the app: a `tourops worker`'s on WORKER_METRICS_PORT (with its /metrics, on
 * the API's access rule: METRICS_TOKEN when set, else loopback binds only), and a serving
 * process's on PORT while it waits for its database. `/healthz` is 200 from the first moment;
 * until `attach`, `/readyz` is 503 `starting`. Other paths: 404 (`others: 'not-found'`), or the
 * API's 503 problem while the API is not up yet (`others: 'unavailable'`).
 */
export class ProbeServer {
  private source: ProbeSource | null = null;

  private constructor(
    private readonly server: ReturnType<typeof createServer>,
    private readonly errorsBaseUrl: string,
  ) {}

  static async listen(
    config: Config,
    port: number,
    others: 'not-found' | 'unavailable',
  ): Promise<ProbeServer> {
    const access = metricsAccess(config.metrics.token, config.host);
    let probes: ProbeServer | null = null;
    const server = createServer((request, response) => {
      const path = (request.url ?? '').split('?')[0];
      const get = request.method === 'GET' || request.method === 'HEAD';
      const source = probes?.source ?? null;
      if (get && path === '/healthz') return json(response, PROBE_OK, config.errorsBaseUrl);
      if (get && path === '/readyz') {
        if (source === null) return json(response, PROBE_STARTING, config.errorsBaseUrl);
        source.ready().then(
          (answer) => json(response, answer, config.errorsBaseUrl),
          () =>
            json(response, { status: 503, problem: serviceUnavailable() }, config.errorsBaseUrl),
        );
        return;
      }
      const allowed = access(request.headers.authorization);
      if (get && path === '/metrics' && source?.metrics && allowed !== 'hidden') {
        if (allowed === 'unauthorized') {
          response.writeHead(401, { 'www-authenticate': 'Bearer' }).end();
          return;
        }
        const { metrics } = source;
        metrics.render().then(
          (text) => response.writeHead(200, { 'content-type': metrics.contentType }).end(text),
          () => response.writeHead(500).end(),
        );
        return;
      }
      if (others === 'unavailable') {
        return json(response, { status: 503, problem: serviceUnavailable() }, config.errorsBaseUrl);
      }
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, config.host, () => resolve());
    });
    probes = new ProbeServer(server, config.errorsBaseUrl);
    return probes;
  }

  /** From now on the running process answers `/readyz` (and `/metrics`). */
  attach(source: ProbeSource): void {
    this.source = source;
  }

  /** Stops listening; open connections are closed once their answer is written. */
  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeIdleConnections();
    });
  }
}

function json(response: ServerResponse, answer: ProbeAnswer, errorsBaseUrl: string): void {
  if ('problem' in answer) {
    const { problem } = answer;
    response
      .writeHead(problem.status, { ...problem.headers, 'content-type': PROBLEM_CONTENT_TYPE })
      .end(problemBody(problem, errorsBaseUrl));
    return;
  }
  response
    .writeHead(answer.status, { 'content-type': 'application/json; charset=utf-8' })
    .end(JSON.stringify(answer.body));
}
