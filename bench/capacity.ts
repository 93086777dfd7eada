/**
 * The capacity of one PostgreSQL (`npm run bench -- --only capacity`): how far one database
 * carries the delivery engine, and what each delivery costs it in figures that do not depend on
 * this machine's speed.
 *
 * A PostgreSQL cluster of the benchmark's own (initdb in a temp dir, on a free loopback port,
 * durable: fsync on, `pg_stat_statements` loaded), so every statement, row and WAL byte counted
 * is ours and nothing else runs on it. 20 subscriptions to an HTTPS receiver in this process.
 *
 * - Emit: clients created through the clients service one transaction each (a row, its
 *   `client.created` event and one delivery per subscription), as the API writes them.
 * - Backlog runs, with 1, 2 and 4 `tourops worker` processes: a backlog of `deliveries` sent to the
 *   receiver; deliveries/s between the 5th and 95th percentile arrival, and the CPU each party
 *   used meanwhile (the PostgreSQL server, the workers, this process's receiver, the machine).
 * - Per delivery, for both: statements (pg_stat_statements), transactions and rows written
 *   (pg_stat_database), WAL bytes (pg_current_wal_lsn()), PostgreSQL CPU.
 * - Claim at scale: the table grown to `history` delivered rows, a claim of 200 timed as the
 *   worker makes it (bench/delivery-scale.ts's timeClaims).
 */
import { availableParallelism } from 'node:os';
import { sql } from 'kysely';
import pg from 'pg';
import pino from 'pino';
import { loadConfig } from '../src/config.ts';
import { createRuntime, type Runtime } from '../src/runtime.ts';
import { PgCluster } from '../test/helpers/dependencies.ts';
import { testCa } from '../test/helpers/https-receiver.ts';
import { RetentionSeed } from '../test/helpers/retention-seed.ts';
import { emitBacklog, Receiver, steadyRate, webhookServerEnv } from './deliveries.ts';
import { growHistory, subscribedTenant, timeClaims } from './delivery-scale.ts';
import { type ServerProcess, startServer, systemCpu } from './processes.ts';

/** What PostgreSQL did for `deliveries` deliveries, per delivery. */
interface DatabaseCost {
  deliveries: number;
  statements: number;
  transactions: number;
  rowsWritten: number;
  walBytes: number;
  /** PostgreSQL's CPU µs a delivery (every server process). */
  cpuUs: number;
}

export interface CapacityResult {
  /** Emitting: a client created with its event and one delivery per subscription. */
  emit: DatabaseCost;
  backlogRuns: Array<
    DatabaseCost & {
      workers: number;
      perSec: number;
      /** Cores busy meanwhile: the database, the workers, this process (the receiver), all. */
      cores: { database: number; workers: number; receiver: number; machine: number };
      /** The statements called most a delivery: calls a delivery and share of execution time. */
      top: Array<{ query: string; calls: number; timeShare: number }>;
    }
  >;
  claim: { historyRows: number; p50: number; p99: number; max: number; samples: number };
  subscriptions: number;
}

export interface CapacityOptions {
  deliveries: number;
  history: number;
  logLevel: string;
  log: (message: string) => void;
  track: (server: ServerProcess, live: boolean) => void;
}

export const CAPACITY_SUBSCRIPTIONS = 20;
const WORKER_COUNTS = [1, 2, 4];
/** Clients created to measure the emit (× 20 deliveries each). */
const EMIT_CLIENTS = 500;

interface Counters {
  statements: number;
  transactions: number;
  rowsWritten: number;
  lsn: string;
  cpu: number;
}

async function counters(admin: pg.Client, cluster: PgCluster): Promise<Counters> {
  const { rows } = await admin.query(`
    select
      (select coalesce(sum(calls), 0)::bigint from pg_stat_statements s
        join pg_database d on d.oid = s.dbid where d.datname = 'bench') as statements,
      (select xact_commit + xact_rollback from pg_stat_database where datname = 'bench') as transactions,
      (select tup_inserted + tup_updated + tup_deleted from pg_stat_database where datname = 'bench') as rows_written,
      pg_current_wal_lsn()::text as lsn`);
  return {
    statements: Number(rows[0].statements),
    transactions: Number(rows[0].transactions),
    rowsWritten: Number(rows[0].rows_written),
    lsn: rows[0].lsn,
    cpu: cluster.cpuSeconds(),
  };
}

/** Counters between two readings, per delivery. Waits for the stats of ended backends. */
async function costSince(
  admin: pg.Client,
  cluster: PgCluster,
  before: Counters,
  deliveries: number,
): Promise<DatabaseCost> {
  // A backend reports its statistics when it ends or at most every second.
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  const after = await counters(admin, cluster);
  const { rows } = await admin.query('select pg_wal_lsn_diff($1, $2)::bigint as bytes', [
    after.lsn,
    before.lsn,
  ]);
  return {
    deliveries,
    // The readings' own statements are not the engine's.
    statements: (after.statements - before.statements - 2) / deliveries,
    transactions: (after.transactions - before.transactions) / deliveries,
    rowsWritten: (after.rowsWritten - before.rowsWritten) / deliveries,
    walBytes: Number(rows[0].bytes) / deliveries,
    cpuUs: ((after.cpu - before.cpu) * 1e6) / deliveries,
  };
}

async function topStatements(admin: pg.Client, deliveries: number) {
  const { rows } = await admin.query(`
    select query, calls, total_exec_time / sum(total_exec_time) over () as share
    from pg_stat_statements s join pg_database d on d.oid = s.dbid
    where d.datname = 'bench' and query not like '%pg_stat%' and query not like '%pg_wal%'
    order by calls desc limit 8`);
  return rows.map((row) => ({
    query: String(row.query).replace(/\s+/g, ' ').slice(0, 90),
    calls: Number(row.calls) / deliveries,
    timeShare: Number(row.share),
  }));
}

export async function benchCapacity(options: CapacityOptions): Promise<CapacityResult> {
  const { log } = options;
  const cluster = await PgCluster.start({
    fsync: 'on',
    max_connections: '100',
    shared_preload_libraries: 'pg_stat_statements',
    'pg_stat_statements.track': 'top',
  });
  const admin = new pg.Client({ connectionString: cluster.url });
  const ca = await testCa();
  const receiver = await Receiver.start(ca.key, ca.cert);
  let runtime: Runtime | null = null;
  try {
    await admin.connect();
    await admin.query('create database bench');
    await admin.query('create extension pg_stat_statements');
    const url = new URL(cluster.url);
    url.pathname = '/bench';
    const dbEnv = {
      DATABASE_URL: url.toString(),
      SECRET_KEY: 'capacity-bench-secret-key-0123456789abcdef',
      RETENTION_DAYS: '0',
    };
    const serverEnv = webhookServerEnv(dbEnv, options.logLevel, ca.caFile);
    runtime = await createRuntime(
      loadConfig({ ...serverEnv, LOG_LEVEL: 'silent', DATABASE_STATEMENT_TIMEOUT: '10m' }),
      { logger: pino({ level: 'silent' }) },
    );
    const { services } = runtime;
    const { tenant, subscriptions } = await subscribedTenant(
      runtime,
      'Bench Capacity',
      CAPACITY_SUBSCRIPTIONS,
      (i) => receiver.url(`/c/${i}`),
    );

    // Emit, one client a transaction as the API writes it.
    let before = await counters(admin, cluster);
    for (let i = 0; i < EMIT_CLIENTS; i++) {
      await services.clients.create(tenant.id, { kind: 'individual', displayName: `Emit ${i}` });
    }
    const emit = await costSince(admin, cluster, before, EMIT_CLIENTS * CAPACITY_SUBSCRIPTIONS);
    log(
      `capacity: emit ${emit.statements.toFixed(2)} statements, ${emit.rowsWritten.toFixed(2)} rows, ` +
        `${Math.round(emit.walBytes)} WAL bytes, ${Math.round(emit.cpuUs)} µs PostgreSQL CPU a delivery`,
    );
    // Those deliveries are sent by the first backlog run too, so its backlog is short by them.
    let backlog = EMIT_CLIENTS * CAPACITY_SUBSCRIPTIONS;

    const backlogRuns: CapacityResult['backlogRuns'] = [];
    for (const workers of WORKER_COUNTS) {
      const events = Math.ceil((options.deliveries - backlog) / CAPACITY_SUBSCRIPTIONS);
      await emitBacklog(runtime, tenant.id, events);
      const deliveries = backlog + events * CAPACITY_SUBSCRIPTIONS;
      backlog = 0;
      await sql`checkpoint`.execute(runtime.database.db);
      receiver.reset();
      await admin.query('select pg_stat_statements_reset()');
      before = await counters(admin, cluster);
      const machineBefore = systemCpu();
      const receiverBefore = process.cpuUsage();
      const servers: ServerProcess[] = [];
      let workerCpu = 0;
      try {
        for (let i = 0; i < workers; i++) {
          servers.push(
            await startServer({
              name: `worker-capacity-${workers}-${i}`,
              entry: 'bin/tourops.js',
              args: ['worker'],
              env: serverEnv,
              portEnv: 'WORKER_METRICS_PORT',
              readyPath: '/metrics',
            }),
          );
          options.track(servers[i], true);
        }
        await receiver.waitFor(deliveries, Math.max(120_000, deliveries * 5));
      } finally {
        for (const server of servers) {
          workerCpu += server.cpuSeconds() ?? 0;
          await server.stop();
          options.track(server, false);
        }
      }
      const receiverUsage = process.cpuUsage(receiverBefore);
      const machineAfter = systemCpu();
      const cost = await costSince(admin, cluster, before, deliveries);
      const perSec = steadyRate(receiver.arrivals);
      const arrivals = [...receiver.arrivals].sort((a, b) => a - b);
      const seconds = ((arrivals.at(-1) ?? 0) - (arrivals[0] ?? 0)) / 1000;
      const machineCores =
        machineBefore && machineAfter
          ? ((machineAfter.busy - machineBefore.busy) /
              (machineAfter.total - machineBefore.total)) *
            availableParallelism()
          : Number.NaN;
      // The parties' CPU over the backlog run's span (start-up and stop included for the workers).
      const cores = {
        database: (cost.cpuUs * deliveries) / 1e6 / seconds,
        workers: workerCpu / seconds,
        receiver: (receiverUsage.user + receiverUsage.system) / 1e6 / seconds,
        machine: machineCores,
      };
      const top = await topStatements(admin, deliveries);
      backlogRuns.push({ workers, perSec, cores, top, ...cost });
      log(
        `capacity: ${workers} worker(s): ${Math.round(perSec)} deliveries/s; a delivery ` +
          `${cost.statements.toFixed(2)} statements, ${cost.transactions.toFixed(3)} transactions, ` +
          `${cost.rowsWritten.toFixed(2)} rows, ${Math.round(cost.walBytes)} WAL bytes, ` +
          `${Math.round(cost.cpuUs)} µs PostgreSQL CPU; cores: database ${cores.database.toFixed(2)}, ` +
          `workers ${cores.workers.toFixed(2)}, receiver ${cores.receiver.toFixed(2)}, machine ${cores.machine.toFixed(2)}`,
      );
    }

    // The claim with the table grown to `history` delivered rows.
    const seed = new RetentionSeed(tenant.id);
    const rows = await deliveredRows(runtime);
    const started = performance.now();
    if (options.history > rows) {
      await growHistory(runtime, seed, subscriptions, 9, options.history - rows);
    }
    const historyRows = Math.max(rows, options.history);
    log(
      `capacity: ${historyRows} delivered rows (${((performance.now() - started) / 1000).toFixed(0)} s)`,
    );
    const timed = await timeClaims(runtime, tenant.id);
    log(
      `capacity: claim of 200 at ${historyRows} rows: p50 ${timed.p50.toFixed(2)} ms, p99 ${timed.p99.toFixed(2)} ms`,
    );
    return {
      emit,
      backlogRuns,
      claim: { historyRows, ...timed },
      subscriptions: CAPACITY_SUBSCRIPTIONS,
    };
  } finally {
    await runtime?.close();
    await admin.end().catch(() => undefined);
    await receiver.close();
    cluster.destroy();
  }
}

async function deliveredRows(runtime: Runtime): Promise<number> {
  const { rows } = await sql<{ n: string }>`select count(*) as n from webhook_deliveries`.execute(
    runtime.database.db,
  );
  return Number(rows[0].n);
}
