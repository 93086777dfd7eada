/**
 * Deliveries at scale on PostgreSQL (`npm run bench -- --only scale`): whether the worker's claim
 * stays index-bound as delivered history grows, and what the API and two worker processes work off
 * together on one database.
 *
 * - Claims: with 0, half and all of `history` delivered rows over 20 subscriptions (written by
 *   the database itself, then ANALYZE as autovacuum would, and a CHECKPOINT), a backlog of
 *   30,000 pending rows is claimed 200 at a time by `DeliveriesService.claim` exactly as the
 *   worker calls it (16 a subscription), each claim timed in this process; claimed rows are then
 *   marked delivered.
 * - Backlog run: on the full history, a backlog of `deliveries` (to the same 20 subscriptions) worked off
 *   by one API process with its worker (`src/main.ts`) and two `tourops worker` processes, to an
 *   HTTPS receiver in this process; deliveries/s between the 5th and 95th percentile arrival.
 *
 * RETENTION_DAYS=0 keeps the history (the purge would otherwise delete nothing here anyway: the
 * rows are recent).
 */

import { sql } from 'kysely';
import pino from 'pino';
import { loadConfig } from '../src/config.ts';
import { subscriptionClaimShare } from '../src/delivery/admission.ts';
import { DEFAULT_BATCH_SIZE, DEFAULT_MAX_PER_SUBSCRIPTION } from '../src/delivery/worker.ts';
import { createRuntime, type Runtime } from '../src/runtime.ts';
import { testCa } from '../test/helpers/https-receiver.ts';
import { RetentionSeed, runSeed } from '../test/helpers/retention-seed.ts';
import { emitBacklog, Receiver, steadyRate, webhookServerEnv } from './deliveries.ts';
import { percentile } from './measure.ts';
import { type ServerProcess, startServer } from './processes.ts';

export interface ScaleResult {
  backend: string;
  claims: Array<{ historyRows: number; p50: number; p99: number; max: number; samples: number }>;
  backlog: { deliveries: number; perSec: number; processes: number };
}

export interface ScaleBenchOptions {
  backend: string;
  dbEnv: Record<string, string>;
  /** Delivered rows the table grows to. */
  history: number;
  /** Deliveries the backlog run sends. */
  deliveries: number;
  logLevel: string;
  log: (message: string) => void;
  track: (server: ServerProcess, live: boolean) => void;
}

const SUBSCRIPTIONS = 20;
/** As the worker claims, with its default settings. */
const CLAIM_BATCH = DEFAULT_BATCH_SIZE;
const CLAIM_PER_SUBSCRIPTION = subscriptionClaimShare(DEFAULT_MAX_PER_SUBSCRIPTION);
/** Events of each timed backlog (× 20 subscriptions = 30,000 pending rows, 150 claims). */
const CLAIM_BACKLOG_EVENTS = 1_500;
const WORKERS = 2;
/** Delivered rows per seeding statement (a multiple of the 20 subscriptions). */
const SEED_CHUNK = 100_000;

export async function benchDeliveryScale(options: ScaleBenchOptions): Promise<ScaleResult> {
  const { backend, log } = options;
  const ca = await testCa();
  const receiver = await Receiver.start(ca.key, ca.cert);
  const serverEnv = {
    ...webhookServerEnv(options.dbEnv, options.logLevel, ca.caFile),
    RETENTION_DAYS: '0',
  };
  const runtime = await createRuntime(loadConfig({ ...serverEnv, LOG_LEVEL: 'silent' }), {
    logger: pino({ level: 'silent' }),
  });
  try {
    const { tenant, subscriptions } = await subscribedTenant(
      runtime,
      'Bench Scale',
      SUBSCRIPTIONS,
      (i) => receiver.url(`/s/${i}`),
    );
    const seed = new RetentionSeed(tenant.id);
    const claims: ScaleResult['claims'] = [];
    let rows = 0;
    for (const [step, size] of [0, options.history / 2, options.history].entries()) {
      if (size > rows) {
        const started = performance.now();
        await growHistory(runtime, seed, subscriptions, step, size - rows);
        rows = size;
        log(
          `${backend}: scale: ${rows} delivered rows (${((performance.now() - started) / 1000).toFixed(1)} s)`,
        );
      }
      const timed = await timeClaims(runtime, tenant.id);
      // The history grew by the backlog too.
      rows += CLAIM_BACKLOG_EVENTS * SUBSCRIPTIONS;
      claims.push({ historyRows: rows, ...timed });
      log(
        `${backend}: scale: claim of ${CLAIM_BATCH} at ${rows} rows: p50 ${timed.p50.toFixed(2)} ms, ` +
          `p99 ${timed.p99.toFixed(2)} ms (${timed.samples} claims)`,
      );
    }

    // The backlog run: the API with its worker and two worker processes.
    await emitBacklog(runtime, tenant.id, options.deliveries / SUBSCRIPTIONS);
    receiver.reset();
    const servers: ServerProcess[] = [];
    try {
      servers.push(
        await startServer({ name: `api-${backend}-scale`, entry: 'src/main.ts', env: serverEnv }),
      );
      for (let i = 0; i < WORKERS; i++) {
        servers.push(
          await startServer({
            name: `worker-${backend}-scale-${i}`,
            entry: 'bin/tourops.js',
            args: ['worker'],
            // A worker answers no HTTP but its /metrics: that is its readiness here.
            env: serverEnv,
            portEnv: 'WORKER_METRICS_PORT',
            readyPath: '/metrics',
          }),
        );
      }
      for (const server of servers) options.track(server, true);
      await receiver.waitFor(options.deliveries, Math.max(120_000, options.deliveries * 3));
    } finally {
      for (const server of servers) {
        await server.stop();
        options.track(server, false);
      }
    }
    const perSec = steadyRate(receiver.arrivals);
    log(`${backend}: scale: worked off ${options.deliveries} at ${Math.round(perSec)}/s`);
    return {
      backend,
      claims,
      backlog: { deliveries: options.deliveries, perSec, processes: 1 + WORKERS },
    };
  } finally {
    await runtime.close();
    await receiver.close();
  }
}

/**
 * Adds `added` delivered rows (and their events) over `subscriptions`, as weeks of history would
 * have left them, then ANALYZE and CHECKPOINT on PostgreSQL. `step`: a different one per call.
 */
export async function growHistory(
  runtime: Runtime,
  seed: RetentionSeed,
  subscriptions: string[],
  step: number,
  added: number,
): Promise<void> {
  const { database } = runtime;
  const db = database.db;
  const ms = Date.now() - 3_600_000;
  // In statements of SEED_CHUNK rows: each is bound by DATABASE_STATEMENT_TIMEOUT.
  for (let chunk = 0; chunk * SEED_CHUNK < added; chunk++) {
    const n = Math.min(SEED_CHUNK, added - chunk * SEED_CHUNK);
    const tag = `h${step}c${chunk}`;
    await runSeed(db, [
      seed.events(tag, n / subscriptions.length, ms),
      seed.deliveries(1000 * (step + 1) + chunk, tag, n, ms, () => sql`'success'`, subscriptions),
    ]);
  }
  if (database.dialect === 'postgres') {
    await sql`analyze`.execute(db);
    // The seed writes in seconds the WAL that weeks of history would (about 1 GB for 500,000
    // rows and their indexes): the checkpoint it triggers (max_wal_size) started during the
    // timed claims that follow, which then took 30-100 ms once or twice in 150.
    await sql`checkpoint`.execute(db);
  }
}

/**
 * A backlog of CLAIM_BACKLOG_EVENTS events for the tenant's subscriptions, claimed CLAIM_BATCH at
 * a time exactly as the worker claims, each claim timed; claimed rows are marked delivered.
 */
export async function timeClaims(
  runtime: Runtime,
  tenantId: string,
): Promise<{ p50: number; p99: number; max: number; samples: number }> {
  await emitBacklog(runtime, tenantId, CLAIM_BACKLOG_EVENTS);
  const durations: number[] = [];
  for (;;) {
    const now = new Date();
    const t0 = performance.now();
    const claimed = await runtime.queue.claim(now, CLAIM_BATCH, {
      workerId: 'wkr_bench',
      aliveSince: now.toISOString(),
      staleBefore: new Date(now.getTime() - 70_000).toISOString(),
      rowsPerSubscription: CLAIM_PER_SUBSCRIPTION,
      paceHorizonUs: 500_000,
    });
    if (claimed.length === 0) break;
    durations.push(performance.now() - t0);
    // Settled as delivered: off the queue, success in the history.
    await sql`delete from webhook_queue where claimed_by = 'wkr_bench'`.execute(
      runtime.database.db,
    );
    await runtime.database.db
      .updateTable('webhookDeliveries')
      .set({ status: 'success' })
      .where(
        'id',
        'in',
        claimed.map((d) => d.id),
      )
      .execute();
  }
  durations.sort((a, b) => a - b);
  return {
    p50: percentile(durations, 50),
    p99: percentile(durations, 99),
    max: durations.at(-1) ?? Number.NaN,
    samples: durations.length,
  };
}

/** An enterprise tenant with `count` subscriptions to `client.created`, at `url(i)`. */
export async function subscribedTenant(
  runtime: Runtime,
  name: string,
  count: number,
  url: (i: number) => string,
): Promise<{ tenant: { id: string }; subscriptions: string[] }> {
  const { services } = runtime;
  const tenant = await services.tenants.create({
    name,
    slug: name.toLowerCase().replaceAll(' ', '-'),
    tier: 'enterprise',
  });
  const subscriptions: string[] = [];
  for (let i = 0; i < count; i++) {
    const { subscription } = await services.webhooks.create(tenant.id, {
      url: url(i),
      events: ['client.created'],
    });
    subscriptions.push(subscription.id);
  }
  return { tenant, subscriptions };
}
