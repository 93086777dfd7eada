import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { type Config, resolveSecretKey } from './config.ts';
import { createDatabase, type Database } from './db/database.ts';
import { migrate } from './db/migrate.ts';
import { buildApp } from './http/app.ts';
import { type Clock, systemClock } from './lib/clock.ts';
import { createServices, type Services } from './services/index.ts';

export interface Runtime {
  config: Config;
  database: Database;
  services: Services;
  clock: Clock;
  logger: pino.Logger;
  secretKey: string;
  close(): Promise<void>;
}

/**
 * The composition root: config → database → repositories → services. Nothing opens a
 * connection or reads the environment at import time; the server, CLI and tests all come here.
 */
export async function createRuntime(
  config: Config,
  options: { clock?: Clock; logger?: pino.Logger; migrate?: boolean } = {},
): Promise<Runtime> {
  const logger = options.logger ?? pino({ level: config.logLevel });
  const clock = options.clock ?? systemClock;
  const database = createDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  try {
    if (options.migrate !== false) {
      const applied = await migrate(database);
      if (applied.length > 0) logger.info({ applied }, 'migrations applied');
    }
  } catch (error) {
    await database.close();
    throw error;
  }
  const services = createServices(config, database, clock, (error) =>
    logger.warn({ err: error }, 'background write failed'),
  );
  return {
    config,
    database,
    services,
    clock,
    logger,
    secretKey: resolveSecretKey(config),
    close: () => database.close(),
  };
}

export function createHttpApp(runtime: Runtime, logger?: pino.Logger): Promise<FastifyInstance> {
  return buildApp({
    config: runtime.config,
    database: runtime.database,
    services: runtime.services,
    clock: runtime.clock,
    logger: logger ?? runtime.logger,
  });
}
