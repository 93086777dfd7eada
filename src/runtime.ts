import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { type Config, resolveSecretKey, secretKeySource } from './config.ts';
import { createDatabase, type Database } from './db/database.ts';
import { migrate } from './db/migrate.ts';
import { AUTH_CHANGES_CHANNEL, DELIVERIES_CHANNEL, HOLDS_CHANNEL } from './db/notifier.ts';
import { PgListener } from './db/pg-listener.ts';
import { isDatabaseUnavailable } from './db/unavailable.ts';
import { DeliveryQueue } from './delivery/queue.ts';
import { QueueFigures, queueStats } from './delivery/stats.ts';
import type { Resolver } from './domain/address-guard.ts';
import { type Clock, systemClock } from './lib/clock.ts';
import { Metrics } from './lib/metrics.ts';
import { activeIds, tracing } from './lib/tracing.ts';
import { RateLimits } from './rate-limit/rate-limits.ts';
import { createServices, type Repositories, type Services } from './services/index.ts';

export interface Runtime {
  config: Config;
  database: Database;
  services: Services;
  /** For tests and benchmarks that inspect or seed rows; the app and the CLI use services. */
  repositories: Repositories;
  /** The delivery queue's statements (the worker's, the metrics' figures, tests). */
  queue: DeliveryQueue;
  /** This process's Prometheus metrics (the app's and its worker's). */
  metrics: Metrics;
  clock: Clock;
  logger: pino.Logger;
  /** null when the process was started without one (`secretKey: 'if-present'`). */
  secretKey: string | null;
  close(): Promise<void>;
}

type RuntimeOptions = NonNullable<Parameters<typeof createRuntime>[1]>;

/** The process's JSON logger; with tracing on, every line names the active trace and span. */
function processLogger(config: Config): pino.Logger {
  return pino({
    level: config.logLevel,
    ...(tracing.on ? { mixin: () => activeIds() ?? {} } : {}),
  });
}

/**
 * A database host whose name does not resolve: at start, often one not registered yet (a
 * container's name on compose's network before that container runs), so it is waited for too.
 */
function notResolvedYet(error: unknown): boolean {
  const codes = [
    error,
    (error as { cause?: unknown })?.cause,
    ...((error as AggregateError)?.errors ?? []),
  ].map((each) => (each as { code?: unknown } | null)?.code);
  return codes.includes('ENOTFOUND');
}

/** Between tries of a database that does not answer at start. */
const START_RETRY_MS = 1_000;

/**
 * createRuntime for a process that serves or delivers. Started while its database does not answer
 * (`compose up` starts everything at once; a rolled restart can meet a fail-over), it tries again
 * each second for DATABASE_START_WAIT, saying so in the log, then gives up as createRuntime does.
 * `waiting` runs at the first failed try: the caller's probes say "starting" meanwhile.
 */
export async function createServingRuntime(
  config: Config,
  options: RuntimeOptions = {},
  waiting?: () => void,
): Promise<Runtime> {
  const logger = options.logger ?? processLogger(config);
  const deadline = Date.now() + config.database.startWaitMs;
  // Stopped while it waits: nothing to finish. (As PID 1 of a container, a signal without a
  // listener would be ignored.)
  const stop = (signal: NodeJS.Signals) => {
    logger.info({ signal }, 'stopped while waiting for the database');
    process.exit(0);
  };
  try {
    for (let tries = 1; ; tries++) {
      try {
        return await createRuntime(config, { ...options, logger });
      } catch (error) {
        const left = deadline - Date.now();
        if (!isDatabaseUnavailable(error) && !notResolvedYet(error)) throw error;
        if (left <= 0) {
          // Said whenever there was a wait to spend (a slow first try may have spent it all).
          if (config.database.startWaitMs > 0) {
            logger.error({ err: error, tries }, 'the database never answered; exiting');
          }
          throw error;
        }
        if (tries === 1) {
          process.once('SIGTERM', stop).once('SIGINT', stop);
          waiting?.();
        }
        // The first failure, then one line every ten tries: an outage is not a log flood.
        if (tries % 10 === 1) {
          const waitMs = config.database.startWaitMs;
          logger.warn(
            { err: error, tries, waitMs },
            'waiting for the database (DATABASE_START_WAIT)',
          );
        }
        await new Promise((resolve) => setTimeout(resolve, Math.min(START_RETRY_MS, left)));
      }
    }
  } finally {
    process.off('SIGTERM', stop).off('SIGINT', stop);
  }
}

/**
 * The composition root: config → database → repositories → services. Nothing opens a
 * connection or reads the environment at import time; the server, CLI and tests all come here.
 */
export async function createRuntime(
  config: Config,
  options: {
    clock?: Clock;
    logger?: pino.Logger;
    migrate?: boolean;
    /** Serving processes hear other processes' auth changes (PostgreSQL LISTEN). */
    listen?: boolean;
    /** DNS for the webhook address guard (tests inject answers). */
    resolver?: Resolver;
    /**
     * `if-present`: the process seals and opens nothing (most CLI commands), so it runs without
     * a SECRET_KEY; one that is there is still checked. Default `required`.
     */
    secretKey?: 'required' | 'if-present';
  } = {},
): Promise<Runtime> {
  const logger = options.logger ?? processLogger(config);
  const keyNeed = options.secretKey ?? 'required';
  // PostgreSQL's key comes from the environment alone: a missing one stops start-up before any
  // connection. The embedded one lives in DATA_DIR, which the database opens (and checks) first.
  const pgKey = config.databaseUrl ? resolveSecretKey(config, keyNeed) : null;
  const clock = options.clock ?? systemClock;
  const database = createDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    statementTimeoutMs: config.database.statementTimeoutMs,
    connectTimeoutMs: config.database.connectTimeoutMs,
    onIdleConnectionError: (error) =>
      logger.warn({ err: error }, 'an idle database connection failed; it will be replaced'),
  });
  try {
    if (options.migrate !== false) {
      // On PostgreSQL through a connection of its own without the statement time-out: a migration
      // may rewrite a large table.
      const migrator = config.databaseUrl
        ? createDatabase({
            databaseUrl: config.databaseUrl,
            dataDir: config.dataDir,
            poolSize: 1,
            statementTimeoutMs: 0,
            connectTimeoutMs: config.database.connectTimeoutMs,
          })
        : database;
      try {
        const applied = await migrate(migrator);
        if (applied.length > 0) logger.info({ applied }, 'migrations applied');
      } finally {
        if (migrator !== database) await migrator.close();
      }
    }
  } catch (error) {
    await database.close();
    throw error;
  }
  const secretKey = config.databaseUrl ? pgKey : resolveSecretKey(config, keyNeed);
  const { services, repositories } = createServices(
    config,
    database,
    clock,
    (error) => logger.warn({ err: error }, 'background write failed'),
    { secretKey, resolver: options.resolver, keySource: secretKeySource(config) },
  );
  try {
    if (secretKey !== null) await services.secretKeyCheck.verify();
  } catch (error) {
    await database.close();
    throw error;
  }
  let listener: PgListener | null = null;
  if (options.listen && config.databaseUrl) {
    const { notifier, authCache } = services;
    // Changes made through this process reach its cache at once; these are other processes'.
    notifier.on(AUTH_CHANGES_CHANNEL, (payload: string) => {
      try {
        authCache.forget(JSON.parse(payload));
      } catch (error) {
        logger.warn({ err: error }, 'ignored a malformed auth change notification');
      }
    });
    listener = new PgListener(config.databaseUrl, logger);
    for (const channel of [AUTH_CHANGES_CHANNEL, DELIVERIES_CHANNEL, HOLDS_CHANNEL] as const) {
      listener.on(channel, (payload) => notifier.heard(channel, payload));
    }
    try {
      await listener.start();
    } catch (error) {
      await database.close();
      throw error;
    }
  }
  const queue = new DeliveryQueue(database);
  const figures = new QueueFigures(database);
  return {
    config,
    database,
    services,
    repositories,
    queue,
    metrics: new Metrics(() => queueStats(figures, clock, config.webhook)),
    clock,
    logger,
    secretKey,
    close: async () => {
      await services.transformations.close();
      await listener?.close();
      await database.close();
    },
  };
}

/**
 * The HTTP app; its rate-limit store (a Redis connection) lives and closes with it. Its modules
 * load here, on first use: a worker process and the CLI's commands never load them.
 */
export async function createHttpApp(
  runtime: Runtime,
  logger?: pino.Logger,
): Promise<FastifyInstance> {
  const { buildApp } = await import('./http/app.ts');
  const rateLimits = await RateLimits.create(runtime.config, runtime.database, runtime.logger, () =>
    runtime.metrics.rateLimitLocalOnly.inc(),
  );
  return buildApp({
    metrics: runtime.metrics,
    config: runtime.config,
    database: runtime.database,
    services: runtime.services,
    rateLimits,
    clock: runtime.clock,
    logger: logger ?? runtime.logger,
  });
}
