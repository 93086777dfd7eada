/**
 * `npm run bench:engine-floor -- --backend sqlite|postgres`: what the delivery engine costs a
 * delivery without its POST. A backlog of `events` client.created events for four subscriptions
 * is worked off by the real worker (startWorker: claims, admission, signing, the recorder's
 * transactions, metrics) in this process, with WebhookSender's send answering 200 at once instead
 * of posting: nothing leaves the process. Prints this process's CPU a delivery (on PostgreSQL
 * with its server processes' CPU beside it), counted from the first quarter of the backlog on as
 * bench:ab-drain counts, the wall time a delivery spent in the claim and in the recorder's
 * transactions, and how many rows a claim took. Beside a bare POST's CPU (bench:ab-drain prints
 * it), the floor a delivery's cost can be brought to without a queue that writes each row fewer
 * times.
 */
import '../src/v8-flags.ts';
import { parseArgs } from 'node:util';
import { WebhookSender } from '../src/delivery/http-sender.ts';
import { startWorker } from '../src/start-worker.ts';
import { backendOptions, scratchDatabase, WARM_SHARE } from './ab-pairs.ts';
import { emitBacklog, silentRuntime } from './deliveries.ts';
import { commandCpuSeconds, DEFAULT_PG_URL } from './processes.ts';

const USAGE = `usage: npm run bench:engine-floor -- [options]
  --backend <b>   sqlite | postgres (default sqlite)
  --events <n>    events in the backlog, each delivered to 4 subscriptions (default 2000)
  --pg-url <url>  PostgreSQL server to create the database on, 127.0.0.1 only
                  (default $BENCH_PG_URL or postgres://postgres@127.0.0.1:5432/test)
`;
const { values: args } = parseArgs({
  options: {
    backend: { type: 'string', default: 'sqlite' },
    events: { type: 'string', default: '2000' },
    'pg-url': { type: 'string', default: DEFAULT_PG_URL },
    help: { type: 'boolean', default: false },
  },
});
const {
  backend: BACKEND,
  pgUrl: PG_URL,
  integer,
} = backendOptions('bench:engine-floor', USAGE, args);
const EVENTS = integer('events', args.events, 100, 100_000);
const SUBSCRIPTIONS = 4;

// Every send answers 200 at once: the worker does all else it does for a delivery.
WebhookSender.prototype.send = async () => ({
  status: 200,
  error: null,
  errorClass: null,
  body: '',
});

const database = await scratchDatabase(BACKEND, PG_URL, 'tourops-engine-floor');
const runtime = await silentRuntime(database.env);
try {
  const { services } = runtime;
  const tenant = await services.tenants.create({
    name: 'Floor',
    slug: 'floor',
    tier: 'enterprise',
  });
  for (let i = 1; i <= SUBSCRIPTIONS; i++) {
    // A port nothing listens on: no send is made, and none could connect.
    const url = `https://127.0.0.1:9/floor/${i}`;
    await services.webhooks.create(tenant.id, { url, events: ['client.created'] });
  }
  await emitBacklog(runtime, tenant.id, EVENTS);

  const expected = EVENTS * SUBSCRIPTIONS;
  const spent = { claim: 0, transactions: 0 };
  const timed =
    <T extends unknown[], R>(key: keyof typeof spent, f: (...a: T) => Promise<R>) =>
    async (...a: T): Promise<R> => {
      const started = performance.now();
      try {
        return await f(...a);
      } finally {
        spent[key] += performance.now() - started;
      }
    };
  const claim = timed('claim', runtime.queue.claim.bind(runtime.queue));
  const claims = { count: 0, rows: 0 };
  runtime.queue.claim = async (...a) => {
    const rows = await claim(...a);
    claims.count += 1;
    claims.rows += rows.length;
    return rows;
  };
  runtime.database.withTransaction = timed(
    'transactions',
    runtime.database.withTransaction.bind(runtime.database),
  ) as typeof runtime.database.withTransaction;

  const serverCpu = () =>
    BACKEND === 'postgres'
      ? [...(commandCpuSeconds('postgres')?.values() ?? [])].reduce((a, b) => a + b, 0)
      : 0;
  let recorded = 0;
  type Mark = { recorded: number; cpu: NodeJS.CpuUsage; server: number; spent: typeof spent };
  let from = null as Mark | null;
  const engine = startWorker(runtime);
  await new Promise<void>((resolve) => {
    engine.worker.on('recorded', (batch: unknown[]) => {
      recorded += batch.length;
      if (from === null && recorded >= expected * WARM_SHARE) {
        from = { recorded, cpu: process.cpuUsage(), server: serverCpu(), spent: { ...spent } };
      }
      if (recorded >= expected) resolve();
    });
  });
  if (from === null) throw new Error('the backlog was recorded without its first quarter');
  const start: Mark = from;
  const cpu = process.cpuUsage(start.cpu);
  const n = recorded - start.recorded;
  const us = (seconds: number) => ((seconds * 1e6) / n).toFixed(1);
  console.log(
    `${BACKEND}: ${expected} deliveries, the last ${n} counted: ` +
      `${us((cpu.user + cpu.system) / 1e6)} µs CPU a delivery in this process` +
      (BACKEND === 'postgres'
        ? `, ${us(serverCpu() - start.server)} in PostgreSQL's processes`
        : '') +
      `; wall time a delivery in the claim ${us((spent.claim - start.spent.claim) / 1000)} µs, ` +
      `in the recorder's transactions ${us((spent.transactions - start.spent.transactions) / 1000)} µs` +
      ` (${claims.count} claims, ${(claims.rows / claims.count).toFixed(1)} rows each on average)`,
  );
  await engine.stop();
} finally {
  await runtime.close();
  await database.drop();
}
