import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry } from 'prom-client';
import { RateLimiterClusterMaster } from 'rate-limiter-flexible';
import { type Config, describeDatabase } from './config.ts';
import { CLUSTER_NOTIFY_MESSAGE } from './db/notifier.ts';
import { DEFAULT_MAX_PER_SUBSCRIPTION, DEFAULT_MAX_RUNNING } from './delivery/worker.ts';
import { CLUSTER_METRICS_MESSAGE } from './lib/metrics.ts';
import {
  adminApiLine,
  checkListenAddress,
  listeningLine,
  runtimeWithProbes,
  warnAtStartup,
} from './serve.ts';

/** More unplanned exits than this within RESTART_WINDOW_MS: the service is broken, stop it. */
const MAX_RESTARTS = 5;
const RESTART_WINDOW_MS = 60_000;

/**
 * `tourops serve --processes N` (N > 1), in the primary process: applies the migrations (and
 * generates SECRET_KEY on first start) once, then forks N API processes that share the port
 * through node:cluster (the primary accepts connections and hands them out in turn). It holds
 * what they must share: the rate-limit counters when no shared store is configured (the embedded
 * setup; rate-limiter-flexible's cluster store), and it aggregates their metrics for /metrics.
 * A process that dies is replaced; SIGTERM or SIGINT stops them all gracefully, and the primary
 * exits 0 when every one did.
 */
export async function servePrimary(config: Config, processes: number): Promise<void> {
  await checkListenAddress(config);
  const runtime = await runtimeWithProbes(config, {});
  warnAtStartup(runtime);
  await runtime.close();
  if (config.redisUrl === null && config.databaseUrl === null) new RateLimiterClusterMaster();
  const aggregator = new AggregatorRegistry();
  cluster.on('message', (worker, message: { type?: string; id?: number }) => {
    if (message?.type === CLUSTER_NOTIFY_MESSAGE) {
      for (const other of Object.values(cluster.workers ?? {})) {
        if (other && other !== worker && other.isConnected()) other.send(message);
      }
      return;
    }
    if (message?.type !== CLUSTER_METRICS_MESSAGE) return;
    aggregator.clusterMetrics().then(
      (text) => worker.send({ type: CLUSTER_METRICS_MESSAGE, id: message.id, text }),
      (error: Error) =>
        worker.send({ type: CLUSTER_METRICS_MESSAGE, id: message.id, error: error.message }),
    );
  });

  let stopping = false;
  const restarts: number[] = [];
  const listening = new WeakSet<Worker>();
  const fork = () => {
    const worker = cluster.fork();
    worker.once('listening', () => listening.add(worker));
    return worker;
  };
  cluster.on('exit', (worker: Worker, code, signal) => {
    if (stopping) return;
    const now = Date.now();
    restarts.push(now);
    while (restarts.length > 0 && restarts[0] < now - RESTART_WINDOW_MS) restarts.shift();
    if (restarts.length > MAX_RESTARTS) {
      console.error(
        `tourops: API processes keep exiting (${restarts.length} in a minute, last: ${signal ?? code}); stopping`,
      );
      void stop(1);
      return;
    }
    console.error(
      `tourops: API process ${worker.process.pid} exited (${signal ?? `code ${code}`}); starting another`,
    );
    fork().once('listening', function announce(this: Worker) {
      console.error(`tourops: API process ${this.process.pid} serving in its place`);
    });
  });

  const stop = async (exitCode: number) => {
    if (stopping) return;
    stopping = true;
    const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => !!w);
    const codes = await Promise.race([
      Promise.all(
        workers.map(
          (worker) =>
            new Promise<boolean>((resolve) => {
              if (worker.isDead()) return resolve(worker.process.exitCode === 0);
              // One still starting has not installed its handler: SIGTERM ends it, cleanly.
              const serving = listening.has(worker);
              worker.once('exit', (code, signal) =>
                resolve(code === 0 || (!serving && signal === 'SIGTERM')),
              );
              worker.process.kill('SIGTERM');
            }),
        ),
      ),
      // Each process drains, then bounds its own stop by SHUTDOWN_TIMEOUT; this is the backstop.
      new Promise<null>((resolve) =>
        setTimeout(() => resolve(null), config.shutdownDrainMs + config.shutdownTimeoutMs + 2_000),
      ),
    ]);
    if (codes === null) {
      for (const worker of workers) worker.process.kill('SIGKILL');
      process.exit(1);
    }
    process.exit(codes.every(Boolean) ? exitCode : 1);
  };
  process.on('SIGINT', () => void stop(0));
  process.on('SIGTERM', () => void stop(0));

  await Promise.all(
    Array.from(
      { length: processes },
      () => new Promise<void>((resolve) => fork().once('listening', () => resolve())),
    ),
  );
  process.stdout.write(
    `\n${listeningLine(config, `${describeDatabase(config)}, ${processes} processes`)}\n` +
      `OpenAPI document: ${config.publicBaseUrl}/v1/openapi.json\n${adminApiLine(config)}\n\n`,
  );
}

/** What one of N API processes runs: its share of one worker's slots. */
export function workerShare(processes: number): {
  maxRunning: number;
  maxPerSubscription: number;
} {
  return {
    maxRunning: Math.ceil(DEFAULT_MAX_RUNNING / processes),
    maxPerSubscription: Math.ceil(DEFAULT_MAX_PER_SUBSCRIPTION / processes),
  };
}
