/**
 * `npm run bench:ab-drain -- --base <dir>`: A/B of the webhook backlog run against two checkouts,
 * for engine changes too small for the noise between two `npm run bench` runs. Each window gives
 * one checkout a database of its own (each migrates and seeds it itself, so their migrations may
 * differ): its API (`serve --no-worker`) writes a backlog of `events` client.created events for
 * four subscriptions (to an HTTPS receiver in this process, or the machine's RabbitMQ or NATS
 * JetStream, consumed here); then its `npm start` process (API and worker) works the backlog off.
 * The checkouts alternate window by window (A B, B A, …), so a host that slows down for a while
 * slows both. Reports the worker process's CPU a delivery (from /proc, from the first quarter of
 * the backlog delivered to the last arrival; its main thread's and V8's helper threads' apart) and
 * the deliveries/s of the steady part, and per pair the ratio B/A (B is this checkout), with their
 * geometric mean. Over HTTPS, then the same number of bare undici POSTs (bench/raw-sender.ts,
 * runRawSender, counted from the same quarter on) to the same receiver, their CPU a POST beside
 * B's a delivery.
 *
 *   git worktree add /tmp/base <rev> && ln -s "$PWD/node_modules" /tmp/base/node_modules
 *   npm run bench:ab-drain -- --base /tmp/base --backend postgres --pairs 5
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { DEFAULT_MAX_CONCURRENCY } from '../src/domain/flow-control.ts';
import { testCa } from '../test/helpers/https-receiver.ts';
import {
  checkoutOptions,
  runPairs,
  scratchDatabase,
  WARM_SHARE,
  type WindowResult,
} from './ab-pairs.ts';
import {
  type Arrivals,
  deliveredBodyBytes,
  natsSink,
  Receiver,
  rabbitSink,
  runRawSender,
  steadyRate,
} from './deliveries.ts';
import { median } from './measure.ts';
import { UNLIMITED_RATES } from './probes.ts';
import {
  cpuSplit,
  cpuSplitWords,
  DEFAULT_PG_URL,
  killAllChildrenNow,
  REPO_ROOT,
  type ServerProcess,
  startServer,
} from './processes.ts';
import { type CpuProfile, formatProfileSummary, summarizeProfile } from './profile.ts';

const USAGE = `usage: npm run bench:ab-drain -- --base <dir> [options]
  --base <dir>      the other checkout (A); this one is B. It needs node_modules (a symlink)
  --backend <b>     sqlite | postgres (default sqlite)
  --pairs <n>       window pairs (default 5)
  --events <n>      events a backlog, each delivered to 4 subscriptions (default 2000)
  --destination <d> https | rabbitmq | nats (default https)
  --profile <dir>   a CPU profile of each checkout's first drain into <dir>, its summary printed
  --pg-url <url>    PostgreSQL server to create the databases on, 127.0.0.1 only
                    (default $BENCH_PG_URL or postgres://postgres@127.0.0.1:5432/test)
`;

const { values: args } = parseArgs({
  options: {
    base: { type: 'string' },
    backend: { type: 'string', default: 'sqlite' },
    pairs: { type: 'string', default: '5' },
    events: { type: 'string', default: '2000' },
    destination: { type: 'string', default: 'https' },
    profile: { type: 'string' },
    'pg-url': { type: 'string', default: DEFAULT_PG_URL },
    help: { type: 'boolean', default: false },
  },
});
const {
  base: BASE,
  backend: BACKEND,
  pairs: PAIRS,
  pgUrl: PG_URL,
  usageError,
  integer,
} = checkoutOptions('bench:ab-drain', USAGE, args);
const EVENTS = integer('events', args.events, 100, 100_000);
const DESTINATION = args.destination;
if (!['https', 'rabbitmq', 'nats'].includes(DESTINATION)) {
  usageError('--destination must be https, rabbitmq or nats');
}

const SUBSCRIPTIONS = 4;
const ADMIN_TOKEN = randomBytes(24).toString('hex');
const ca = await testCa();

const receiver = await Receiver.start(ca.key, ca.cert);
const httpsUrls = Array.from({ length: SUBSCRIPTIONS }, (_, i) => receiver.url(`/ok/${i + 1}`));
const nats = DESTINATION === 'nats' ? await natsSink(SUBSCRIPTIONS) : null;
const broker = DESTINATION === 'rabbitmq' ? await rabbitSink(SUBSCRIPTIONS) : nats;
/** Where the deliveries are counted, and the subscriptions' URLs. */
const sink: Arrivals = broker?.sink ?? receiver;
const urls = broker?.urls ?? httpsUrls;

async function call(
  server: ServerProcess,
  method: string,
  path: string,
  token: string,
  body?: unknown,
): Promise<Record<string, unknown>> {
  const response = await fetch(`${server.baseUrl}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
  return text === '' ? {} : (JSON.parse(text) as Record<string, unknown>);
}

/** A tenant, its subscriptions and its backlog, written through the checkout's own API. */
async function writeBacklog(api: ServerProcess): Promise<void> {
  const slug = `drain-${randomBytes(3).toString('hex')}`;
  const tenant = (await call(api, 'POST', '/admin/v1/tenants', ADMIN_TOKEN, {
    name: 'Drain',
    slug,
    tier: 'enterprise',
  })) as { data: { id: string } };
  const minted = (await call(
    api,
    'POST',
    `/admin/v1/tenants/${tenant.data.id}/tokens`,
    ADMIN_TOKEN,
    {
      scopes: ['*'],
      name: 'drain',
    },
  )) as { token: string };
  for (const url of urls) {
    await call(api, 'POST', '/api/v1/webhooks', minted.token, { url, events: ['client.created'] });
  }
  let next = 0;
  const writer = async () => {
    while (next < EVENTS) {
      next += 1;
      await call(api, 'POST', '/api/v1/clients', minted.token, {
        kind: 'individual',
        displayName: `Client ${next}`,
      });
    }
  };
  await Promise.all(Array.from({ length: 16 }, writer));
}

const profiled = new Set<string>();

/** One window: a fresh database, the backlog, the drain. CPU µs a delivery and deliveries/s. */
async function window(checkout: string): Promise<WindowResult> {
  const database = await scratchDatabase(BACKEND, PG_URL, 'tourops-ab-drain');
  const env: Record<string, string> = {
    ...database.env,
    ADMIN_API_TOKEN: ADMIN_TOKEN,
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    WEBHOOK_CA_FILE: ca.caFile,
    LOG_LEVEL: 'warn',
    DEPLOYMENT_ENV: 'test',
    ...UNLIMITED_RATES,
  };
  try {
    const api = await startServer({
      name: 'backlog writer',
      entry: join(checkout, 'src', 'cli', 'main.ts'),
      args: ['serve', '--no-worker'],
      env,
    });
    try {
      await writeBacklog(api);
    } finally {
      await api.stop();
    }
    await nats?.purge();
    sink.reset();
    const expected = EVENTS * SUBSCRIPTIONS;
    const server = await startServer({
      name: 'worker',
      entry: join(checkout, 'src', 'main.ts'),
      env,
    });
    try {
      // CPU after a WARM_SHARE of the backlog, as the bare sender counts after its warm POSTs:
      // deliveries before it are left out of the count.
      await sink.waitFor(Math.floor(expected * WARM_SHARE), 600_000);
      const profileDir = profiled.has(checkout) ? undefined : args.profile;
      if (profileDir !== undefined) await server.startCpuProfile();
      const arrivedBefore = sink.arrivals.length;
      const cpuBefore = server.cpuSeconds();
      const splitBefore = cpuSplit(server.pid);
      await sink.waitFor(expected, 600_000);
      const cpuAfter = server.cpuSeconds();
      const splitAfter = cpuSplit(server.pid);
      if (profileDir !== undefined) {
        profiled.add(checkout);
        mkdirSync(resolve(profileDir), { recursive: true });
        const file = join(resolve(profileDir), `drain-${profiled.size}.cpuprofile`);
        await server.stopCpuProfile(file);
        const summary = summarizeProfile(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile);
        console.log(formatProfileSummary(`${checkout} (${file})`, summary));
      }
      if (cpuBefore === null || cpuAfter === null || splitBefore === null || splitAfter === null) {
        throw new Error('no CPU reading (/proc)');
      }
      const counted = expected - arrivedBefore;
      return {
        cpuUs: ((cpuAfter - cpuBefore) * 1e6) / counted,
        rate: steadyRate(sink.arrivals),
        split: cpuSplitWords(splitBefore, splitAfter, counted),
      };
    } finally {
      await server.stop();
    }
  } finally {
    await database.drop();
  }
}

try {
  const checkouts = { A: BASE, B: REPO_ROOT } as const;
  console.log(
    `A = ${BASE}, B = ${REPO_ROOT}; ${BACKEND}, ${EVENTS} events x ${SUBSCRIPTIONS} ` +
      `subscriptions to ${DESTINATION}, ${PAIRS} pairs of windows`,
  );
  const { cpuB } = await runPairs(
    PAIRS,
    { rate: 'deliveries/s', cpu: 'µs CPU a delivery' },
    (label) => window(checkouts[label]),
  );
  if (DESTINATION === 'https') {
    // The same number of bare undici POSTs to the same receiver (no database, no signing), after
    // a run that warms the receiver, as many at a time as the drain's subscriptions may have in
    // flight: more at once would open more connections than the drain does, each dearer.
    const bodyBytes = deliveredBodyBytes(EVENTS);
    const inFlight = SUBSCRIPTIONS * DEFAULT_MAX_CONCURRENCY;
    await runRawSender(httpsUrls, EVENTS, bodyBytes, ca.caFile, inFlight);
    const bare: number[] = [];
    for (let run = 0; run < 3; run++) {
      const count = EVENTS * SUBSCRIPTIONS;
      const warm = Math.floor(count * WARM_SHARE);
      const measured = await runRawSender(httpsUrls, count, bodyBytes, ca.caFile, inFlight, warm);
      if (measured === undefined) throw new Error('the bare sender measured no CPU');
      bare.push(measured.cpuUs);
      console.log(
        `bare POSTs ${run + 1}: ${measured.cpuUs.toFixed(0)} µs CPU a POST; ${measured.split}`,
      );
    }
    console.log(
      `bare POSTs: ${bare.map((us) => us.toFixed(0)).join(', ')} µs CPU a POST; ` +
        `B's delivery / a bare POST: ${(cpuB / median(bare)).toFixed(2)}`,
    );
  }
} finally {
  killAllChildrenNow();
  await broker?.close();
  await receiver.close();
}
