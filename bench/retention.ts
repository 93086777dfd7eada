/**
 * The retention row of `npm run bench`: the API's authenticated single read while its worker
 * purges 200,000 deliveries past RETENTION_DAYS (with their attempts and events), beside the same
 * read without a purge.
 *
 * One API process (`src/main.ts`, what `npm start` runs, so on SQLite the purge shares the API's
 * thread, as it does in production) on a database seeded with a 1,000-trip tenant and the
 * history to purge (written by the database itself, see test/helpers/retention-seed.ts). Its
 * sweeper is held (BENCH_RETENTION=manual, see child-agent.ts) until the benchmark starts the
 * purge over IPC. Three windows of the same closed-loop load: without (before), during (the
 * measured part opens as the purge starts and closes as it ends), without (after); the two
 * "without" windows are combined.
 */
import { sql } from 'kysely';
import pino from 'pino';
import { loadConfig } from '../src/config.ts';
import { createRuntime } from '../src/runtime.ts';
import type { PurgeReport } from '../src/services/retention-service.ts';
import { RetentionSeed, runSeed } from '../test/helpers/retention-seed.ts';
import { combine, type Measurement, runWindow, type Window } from './measure.ts';
import { type ServerProcess, startServer } from './processes.ts';
import { seedTenant } from './seed.ts';

export interface RetentionResult {
  backend: string;
  rows: number;
  purge: PurgeReport;
  without: Measurement;
  during: Measurement;
}

export interface RetentionBenchOptions {
  backend: string;
  /** The database's environment (DATA_DIR, or DATABASE_URL and SECRET_KEY). */
  dbEnv: Record<string, string>;
  /** The API's environment besides the database (log level, rate limits). */
  apiEnv: Record<string, string>;
  /** Deliveries past retention (with a quarter as many events and attempts). */
  rows: number;
  connections: number;
  warmupSec: number;
  /** Measured seconds of each window without a purge. */
  durationSec: number;
  dbProcessName?: string;
  log: (message: string) => void;
  track: (server: ServerProcess, live: boolean) => void;
}

const DAY_MS = 86_400_000;
/** The purge window's bound: far past what 200k rows take on either backend. */
const PURGE_LIMIT_SEC = 300;

export async function benchRetention(options: RetentionBenchOptions): Promise<RetentionResult> {
  const { backend, log } = options;
  const tenant = await seedTenant(options.dbEnv, 1_000);
  const seeding = performance.now();
  const runtime = await createRuntime(
    loadConfig({ ...options.dbEnv, LOG_LEVEL: 'silent', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' }),
    { logger: pino({ level: 'silent' }) },
  );
  try {
    const subscriptions: string[] = [];
    for (let i = 0; i < 4; i++) {
      // Never called: every seeded delivery is settled, and the load only reads.
      const { subscription } = await runtime.services.webhooks.create(tenant.tenantId, {
        url: 'https://127.0.0.1:9/never',
        events: ['client.created'],
      });
      subscriptions.push(subscription.id);
    }
    const seed = new RetentionSeed(tenant.tenantId);
    await runSeed(
      runtime.database.db,
      seed.pastRetention(Date.now() - 40 * DAY_MS, options.rows, subscriptions),
    );
    // What autovacuum does to a table that grew (PostgreSQL plans the purge from statistics).
    if (runtime.database.dialect === 'postgres') await sql`analyze`.execute(runtime.database.db);
  } finally {
    await runtime.close();
  }
  log(`${backend}: retention: seeded ${options.rows} deliveries to purge in ${ms(seeding)}`);

  const server = await startServer({
    name: `api-${backend}-retention`,
    entry: 'src/main.ts',
    env: { ...options.dbEnv, ...options.apiEnv, BENCH_RETENTION: 'manual' },
  });
  options.track(server, true);
  try {
    const load = (warmupSec: number, durationSec: number) => ({
      url: `${server.baseUrl}/api/v1/trips/${tenant.tripId}`,
      headers: { authorization: `Bearer ${tenant.token}` },
      connections: options.connections,
      warmupSec,
      durationSec,
    });
    const hooks = { dbProcessName: options.dbProcessName };
    const before = await runWindow(server, load(options.warmupSec, options.durationSec), hooks);
    log(`${backend}: retention: without a purge ${rate(before)}`);
    let report: PurgeReport | null = null;
    const during = await runWindow(
      server,
      {
        ...load(2, PURGE_LIMIT_SEC),
        until: async () => {
          report = (await server.retentionPurge(PURGE_LIMIT_SEC * 1000)) as PurgeReport;
        },
      },
      hooks,
    );
    const purge = report as PurgeReport | null;
    if (purge === null || purge.deliveries !== options.rows) {
      throw new Error(`the purge deleted ${purge?.deliveries ?? 'nothing'} of ${options.rows}`);
    }
    log(`${backend}: retention: during the purge (${purge.ms} ms) ${rate(during)}`);
    const after = await runWindow(server, load(2, options.durationSec), hooks);
    log(`${backend}: retention: without a purge, after it ${rate(after)}`);
    const url = `${server.baseUrl}/api/v1/trips/{id}`;
    return {
      backend,
      rows: options.rows,
      purge,
      without: combine('single read, no purge', backend, url, [before, after]),
      during: combine('single read during the purge', backend, url, [during]),
    };
  } finally {
    await server.stop();
    options.track(server, false);
  }
}

const ms = (since: number) => `${((performance.now() - since) / 1000).toFixed(1)} s`;
const rate = (w: Window) => `${Math.round(w.requests / w.wallSec)} req/s`;
