import cluster from 'node:cluster';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import {
  type Config,
  ConfigError,
  cliEnvPrefix,
  describeDatabase,
  misspeltMessage,
  misspeltVariables,
} from './config.ts';
import type { WorkerOptions } from './delivery/types.ts';
import { demoInstructions, seedDemoIfEmpty } from './demo.ts';
import type { ProbeServer } from './http/probe-server.ts';
import { tracing } from './lib/tracing.ts';
import { createHttpApp, createServingRuntime, type Runtime } from './runtime.ts';
import { startWorker } from './start-worker.ts';

/**
 * Runs the API, and the webhook delivery worker unless `worker` is false, until SIGINT/SIGTERM;
 * then drains for SHUTDOWN_DRAIN (not ready, still serving), stops taking requests and claims,
 * lets running attempts finish, and closes the database.
 */
export async function serve(
  config: Config,
  options: { seedDemo: boolean; worker: boolean; workerOptions?: WorkerOptions },
): Promise<void> {
  // One of `tourops serve --processes N` (see cluster.ts): the primary checked and migrated.
  const inCluster = cluster.isWorker;
  if (!inCluster) await checkListenAddress(config);
  // A cluster's primary waited for the database, its probes on PORT meanwhile.
  const runtime = inCluster
    ? await createServingRuntime(config, { listen: true, migrate: false })
    : await runtimeWithProbes(config, { listen: true });
  // The primary of a cluster has said it once for all its processes.
  if (!inCluster) warnAtStartup(runtime);
  if (inCluster) runtime.metrics.renderInPrimary();
  const demo = options.seedDemo ? await seedDemoIfEmpty(runtime) : null;
  const app = await createHttpApp(runtime);
  const graceful = app.gracefulClose;
  let worker: ReturnType<typeof startWorker> | null = null;
  // Before the banner: whoever waits for it may signal at once.
  stopOnSignals(
    runtime,
    config.shutdownTimeoutMs,
    async () => {
      // Leave a moment of the bound for closing the database and the rest.
      const window = Math.max(100, config.shutdownTimeoutMs - 500);
      const [closed] = await Promise.all([graceful.close(window), worker?.stop()]);
      await app.close();
      return closed;
    },
    { ms: config.shutdownDrainMs, begin: () => graceful.beginDrain() },
  );
  try {
    await app.listen({ port: config.port, host: config.host });
  } catch (error) {
    await Promise.allSettled([app.close(), runtime.close()]);
    throw listenError(error, config);
  }
  // Once the app is ready: compiling its routes holds the event loop, which would hold the
  // worker's first attempts between their start and their first byte (bunching paced sends).
  if (options.worker) worker = startWorker(runtime, options.workerOptions);
  // The primary announces a cluster once all its processes listen.
  if (inCluster) return;
  process.stdout.write(`\n${listeningLine(config, describeDatabase(config))}\n`);
  if (demo) {
    process.stdout.write(`\n${demoInstructions(demo, config.publicBaseUrl)}\n`);
  } else if (options.seedDemo) {
    process.stdout.write(
      `Mint a token with: ${cliEnvPrefix(config)}npx tourops token create --tenant demo --scopes all\n`,
    );
  }
  process.stdout.write(
    `OpenAPI document: ${config.publicBaseUrl}/v1/openapi.json\n${adminApiLine(config)}\n\n`,
  );
}

/**
 * The runtime of a process that listens on PORT, which answers its probes while it waits for its
 * database (`/healthz` 200, `/readyz` 503 `starting`, the API's 503 problem elsewhere), and frees
 * PORT once the database answers.
 */
export async function runtimeWithProbes(
  config: Config,
  options: Parameters<typeof createServingRuntime>[1],
): Promise<Runtime> {
  let probes: Promise<ProbeServer | null> = Promise.resolve(null);
  const waiting = () => {
    probes = import('./http/probe-server.ts').then(({ ProbeServer }) =>
      ProbeServer.listen(config, config.port, 'unavailable'),
    );
  };
  try {
    return await createServingRuntime(config, options, waiting);
  } finally {
    await (await probes.catch(() => null))?.close();
  }
}

/**
 * The start-up line naming where the process listens, and the public URL when it is on another
 * port (behind a load balancer or a TLS proxy): an operator checking a node needs the first.
 */
export function listeningLine(config: Config, details: string): string {
  const listen = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${config.port}`;
  const publicUrl = new URL(config.publicBaseUrl);
  const publicPort = Number(publicUrl.port || (publicUrl.protocol === 'https:' ? 443 : 80));
  const where =
    publicPort === config.port
      ? config.publicBaseUrl
      : `${listen} (public URL ${config.publicBaseUrl})`;
  return `Tour-operator API listening on ${where} (${details})`;
}

/**
 * The start-up line about the admin API: with ADMIN_API_TOKEN unset every /admin route is a bare
 * 404, so the line says how to turn it on (and names a near miss such as ADMIN_TOKEN).
 */
export function adminApiLine(config: Config, env: NodeJS.ProcessEnv = process.env): string {
  if (config.adminApiToken !== null) return `Admin API: ${config.publicBaseUrl}/admin/docs/`;
  const nearMiss = Object.keys(env).find(
    (name) => name !== 'ADMIN_API_TOKEN' && /ADMIN/i.test(name) && env[name],
  );
  return (
    'Admin API off (every /admin route answers 404): to create tenants and tokens, start with ' +
    'ADMIN_API_TOKEN set, e.g. export ADMIN_API_TOKEN=$(openssl rand -hex 32)' +
    (nearMiss ? ` (${nearMiss} is set, but the name is ADMIN_API_TOKEN)` : '')
  );
}

/**
 * The start-up warnings of a serving or working process, one `warn` line each: every variable that
 * looks meant for this service but is not its name, and the address guard lifted.
 */
export function warnAtStartup(
  runtime: Pick<Runtime, 'logger' | 'config'>,
  env: NodeJS.ProcessEnv = process.env,
): void {
  const { logger, config } = runtime;
  for (const misspelt of misspeltVariables(env)) {
    logger.warn({ variable: misspelt.name, nearest: misspelt.nearest }, misspeltMessage(misspelt));
  }
  if (config.webhook.allowPrivateTargets) {
    logger.warn(
      { variable: 'WEBHOOK_ALLOW_PRIVATE_TARGETS' },
      'WEBHOOK_ALLOW_PRIVATE_TARGETS=true: webhooks may target private, loopback and link-local ' +
        'addresses (the SSRF guard is off); for a laptop or a test, never a shared deployment',
    );
  }
}

/**
 * What a serving process does between the signal and the stop (SHUTDOWN_DRAIN): `begin` withdraws
 * readiness at once, and for `ms` the process goes on serving.
 */
export interface DrainPhase {
  ms: number;
  begin(): void;
}

/**
 * On the first SIGINT or SIGTERM: the drain, if any, then `stop` (stop taking work, finish what
 * runs), close the database, exit 0; `stop` and all after it within `timeoutMs`
 * (SHUTDOWN_TIMEOUT), past which the process exits 1 with what still ran cut off. Shared by
 * `serve` and `tourops worker` (which has no drain: no balancer sends it anything).
 */
export function stopOnSignals(
  runtime: Runtime,
  timeoutMs: number,
  stop: () => Promise<unknown>,
  drain?: DrainPhase,
): void {
  let signalled = false;
  const onSignal = async (signal: string) => {
    // A later signal changes nothing: a cluster's processes get the primary's SIGTERM on top of
    // one sent to their whole group (systemd, a terminal's Ctrl-C), and must drain all the same.
    if (signalled) return;
    signalled = true;
    if (drain && drain.ms > 0) {
      drain.begin();
      runtime.logger.info({ signal, drainMs: drain.ms }, 'draining: not ready, still serving');
      await new Promise((resolve) => setTimeout(resolve, drain.ms));
    }
    runtime.logger.info({ signal, timeoutMs }, 'shutting down');
    setTimeout(() => {
      runtime.logger.warn({ timeoutMs }, 'SHUTDOWN_TIMEOUT reached: exiting with work cut off');
      process.exit(1);
    }, timeoutMs);
    let clean = true;
    try {
      clean = (await stop()) !== false;
      await runtime.close();
      // Spans still buffered leave before the process does (nothing to do without tracing).
      await tracing.flush();
    } catch (error) {
      clean = false;
      runtime.logger.error({ err: error }, 'shutdown failed');
    }
    process.exit(clean ? 0 : 1);
  };
  process.on('SIGINT', () => void onSignal('SIGINT'));
  process.on('SIGTERM', () => void onSignal('SIGTERM'));
}

/**
 * HOST is resolved before anything else runs (migrations included), so a name that does not
 * resolve stops start-up naming HOST, not the database.
 */
export async function checkListenAddress(config: Config): Promise<void> {
  if (isIP(config.host) !== 0) return;
  try {
    await lookup(config.host);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unknown';
    throw new ConfigError(`HOST: "${config.host}" does not resolve (${code})`);
  }
}

/** A failed listen, as one line naming the variable to change. */
function listenError(error: unknown, config: Config): unknown {
  const code = (error as NodeJS.ErrnoException).code;
  const where = `${config.host}:${config.port}`;
  switch (code) {
    case 'EADDRINUSE':
      return new ConfigError(`PORT: ${where} is already in use`);
    case 'EACCES':
      return new ConfigError(`PORT: no permission to listen on ${where}`);
    case 'EADDRNOTAVAIL':
      return new ConfigError(`HOST: ${config.host} is not an address of this machine`);
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new ConfigError(`HOST: "${config.host}" does not resolve (${code})`);
    default:
      return error;
  }
}
