/**
 * The retention row of `npm run bench`: the API's authenticated single read while its worker
 * purges 200,000 deliveries past RETENTION_DAYS (with their attempts and events), beside the same
 * read without a purge.
 *
 * The windows are bench/beside-job.ts's, on a database seeded with a 1,000-trip tenant and the
 * history to purge (written by the database itself, see test/helpers/retention-seed.ts). The
 * API's sweeper is held (BENCH_RETENTION=manual, see child-agent.ts) until the benchmark starts
 * the purge over IPC.
 */
import pino from 'pino';
import { loadConfig } from '../src/config.ts';
import { createRuntime } from '../src/runtime.ts';
import type { PurgeReport } from '../src/services/retention-service.ts';
import { RetentionSeed, runSeed } from '../test/helpers/retention-seed.ts';
import { analyze, type BesideJobOptions, readsBesideJob, secondsSince } from './beside-job.ts';
import type { Measurement } from './measure.ts';
import { seedTenant } from './seed.ts';

export interface RetentionResult {
  backend: string;
  rows: number;
  purge: PurgeReport;
  without: Measurement;
  during: Measurement;
}

export interface RetentionBenchOptions extends BesideJobOptions {
  /** Deliveries past retention (with a quarter as many events and attempts). */
  rows: number;
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
    await analyze(runtime.database);
  } finally {
    await runtime.close();
  }
  log(
    `${backend}: retention: seeded ${options.rows} deliveries to purge in ${secondsSince(seeding)}`,
  );

  const { job: purge, ...windows } = await readsBesideJob(options, {
    row: 'retention',
    what: 'a purge',
    env: { BENCH_RETENTION: 'manual' },
    reader: tenant,
    limitSec: PURGE_LIMIT_SEC,
    run: async (server, limitMs) => {
      const report = (await server.retentionPurge(limitMs)) as PurgeReport | null;
      if (report === null || report.deliveries !== options.rows) {
        throw new Error(`the purge deleted ${report?.deliveries ?? 'nothing'} of ${options.rows}`);
      }
      return report;
    },
    describe: (report) => `${report.ms} ms`,
  });
  return { backend, rows: options.rows, purge, ...windows };
}
