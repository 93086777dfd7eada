import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { type Config, resolveSecretKey, secretKeySource } from './config.ts';
import { createDatabase, type Database } from './db/database.ts';
import { migrate } from './db/migrate.ts';
import { AUTH_CHANGES_CHANNEL, DELIVERIES_CHANNEL, HOLDS_CHANNEL } from './db/notifier.ts';
import { PgListener } from './db/pg-listener.ts';
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
  // With tracing on, every line names the active trace and span (see src/tracing-sdk.ts).
  const logger =
    options.logger ??
    pino({ level: config.logLevel, ...(tracing.on ? { mixin: () => activeIds() ?? {} } : {}) });
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
    await listener.start();
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
