/**
 * `npm run bench:ab-drain -- --base <dir>`: A/B of the webhook backlog run against two checkouts,
 * for engine changes too small for the noise between two `npm run bench` runs. Each window gives
 * one checkout a database of its own (each migrates and seeds it itself, so their migrations may
 * differ): its API (`serve --no-worker`) writes a backlog of `events` client.created events for
 * four subscriptions to an HTTPS receiver in this process; then its `npm start` process (API and
 * worker) works the backlog off. The checkouts alternate window by window (A B, B A, …), so a host
 * that slows down for a while slows both. Reports the worker process's CPU a delivery (from /proc,
 * from its readiness to the last arrival) and the deliveries/s of the steady part, and per pair
 * the ratio B/A (B is this checkout), with their geometric mean.
 *
 *   git worktree add /tmp/base <rev> && ln -s "$PWD/node_modules" /tmp/base/node_modules
 *   npm run bench:ab-drain -- --base /tmp/base --backend postgres --pairs 5
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { testCa } from '../test/helpers/https-receiver.ts';
import { checkoutOptions, runPairs } from './ab-pairs.ts';
import { percentile } from './measure.ts';
import { UNLIMITED_RATES } from './probes.ts';
import {
  DEFAULT_PG_URL,
  killAllChildrenNow,
  REPO_ROOT,
  type ServerProcess,
  startServer,
} from './processes.ts';

const USAGE = `usage: npm run bench:ab-drain -- --base <dir> [options]
  --base <dir>      the other checkout (A); this one is B. It needs node_modules (a symlink)
  --backend <b>     sqlite | postgres (default sqlite)
  --pairs <n>       window pairs (default 5)
  --events <n>      events a backlog, each delivered to 4 subscriptions (default 2000)
  --pg-url <url>    PostgreSQL server to create the databases on, 127.0.0.1 only
                    (default $BENCH_PG_URL or postgres://postgres@127.0.0.1:5432/test)
`;

const { values: args } = parseArgs({
  options: {
    base: { type: 'string' },
    backend: { type: 'string', default: 'sqlite' },
    pairs: { type: 'string', default: '5' },
    events: { type: 'string', default: '2000' },
    'pg-url': { type: 'string', default: DEFAULT_PG_URL },
    help: { type: 'boolean', default: false },
  },
});
const {
  base: BASE,
  backend: BACKEND,
  pairs: PAIRS,
  pgUrl: PG_URL,
  integer,
} = checkoutOptions('bench:ab-drain', USAGE, args);
const EVENTS = integer('events', args.events, 100, 100_000);

const SUBSCRIPTIONS = 4;
const ADMIN_TOKEN = randomBytes(24).toString('hex');
const ca = await testCa();

/** The HTTPS receiver: answers 204 at once and keeps each arrival's time. */
let arrivals: number[] = [];
let waiter: (() => void) | null = null;
let expected = 0;
const receiver = createServer({ key: ca.key, cert: ca.cert }, (request, response) => {
  request.resume().on('end', () => {
    arrivals.push(performance.now());
    response.writeHead(204).end();
    if (arrivals.length >= expected) waiter?.();
  });
});
await new Promise<void>((done) => receiver.listen(0, '127.0.0.1', done));
const receiverPort = (receiver.address() as { port: number }).port;

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
  for (let i = 0; i < SUBSCRIPTIONS; i++) {
    await call(api, 'POST', '/api/v1/webhooks', minted.token, {
      url: `https://127.0.0.1:${receiverPort}/hook-${i}`,
      events: ['client.created'],
    });
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

/** One window: a fresh database, the backlog, the drain. CPU µs a delivery and deliveries/s. */
async function window(checkout: string): Promise<{ cpuUs: number; rate: number }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tourops-ab-drain-'));
  const admin = BACKEND === 'postgres' ? new pg.Client({ connectionString: PG_URL }) : null;
  const databaseName = `tourops_ab_drain_${Date.now()}_${randomBytes(3).toString('hex')}`;
  const env: Record<string, string> = {
    SECRET_KEY: randomBytes(32).toString('hex'),
    DATA_DIR: dataDir,
    ADMIN_API_TOKEN: ADMIN_TOKEN,
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    WEBHOOK_CA_FILE: ca.caFile,
    LOG_LEVEL: 'warn',
    DEPLOYMENT_ENV: 'test',
    ...UNLIMITED_RATES,
  };
  try {
    if (admin) {
      await admin.connect();
      await admin.query(`create database ${databaseName}`);
      const url = new URL(PG_URL);
      url.pathname = `/${databaseName}`;
      env.DATABASE_URL = url.toString();
    }
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
    arrivals = [];
    expected = EVENTS * SUBSCRIPTIONS;
    const done = new Promise<void>((resolve) => {
      waiter = resolve;
    });
    const server = await startServer({
      name: 'worker',
      entry: join(checkout, 'src', 'main.ts'),
      env,
    });
    try {
      // CPU from readiness: deliveries that arrived before it are left out of the count.
      const arrivedBefore = arrivals.length;
      const cpuBefore = server.cpuSeconds();
      await done;
      const cpuAfter = server.cpuSeconds();
      if (cpuBefore === null || cpuAfter === null) throw new Error('no CPU reading (/proc)');
      const sorted = [...arrivals].sort((a, b) => a - b);
      const from = percentile(sorted, 5);
      const to = percentile(sorted, 95);
      const steady = sorted.filter((at) => at >= from && at <= to).length;
      return {
        cpuUs: ((cpuAfter - cpuBefore) * 1e6) / (expected - arrivedBefore),
        rate: (steady / (to - from)) * 1000,
      };
    } finally {
      await server.stop();
    }
  } finally {
    waiter = null;
    rmSync(dataDir, { recursive: true, force: true });
    if (admin) {
      await admin
        .query(`drop database if exists ${databaseName} with (force)`)
        .catch(() => undefined);
      await admin.end();
    }
  }
}

try {
  const checkouts = { A: BASE, B: REPO_ROOT } as const;
  console.log(
    `A = ${BASE}, B = ${REPO_ROOT}; ${BACKEND}, ${EVENTS} events x ${SUBSCRIPTIONS} ` +
      `subscriptions over HTTPS, ${PAIRS} pairs of windows`,
  );
  await runPairs(PAIRS, { rate: 'deliveries/s', cpu: 'µs CPU a delivery' }, (label) =>
    window(checkouts[label]),
  );
} finally {
  killAllChildrenNow();
  receiver.close();
}
