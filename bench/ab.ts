/**
 * `npm run bench:ab -- --base <dir>`: A/B of one request against two checkouts, for changes too
 * small for the noise between two `npm run bench` runs. Each window starts a fresh API from one
 * checkout, warms it, then measures it; the checkouts alternate window by window (A B, B A, …) on
 * the same seeded database, so a host that slows down for a while slows both. Reports the API's
 * CPU per request (from /proc, steadier than rates) and req/s of every window, and per pair the
 * ratio B/A (B is this checkout), with their geometric mean.
 *
 *   git worktree add /tmp/base <rev> && ln -s "$PWD/node_modules" /tmp/base/node_modules
 *   npm run bench:ab -- --base /tmp/base --row read --backend postgres --pairs 6
 *
 * Both checkouts must have the same migrations (the database is seeded once, by this checkout).
 */
import { readdirSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { checkoutOptions, runPairs, scratchDatabase } from './ab-pairs.ts';
import { runWindow } from './measure.ts';
import {
  checkProbe,
  createClientProbe,
  listProbe,
  type Probe,
  singleTripProbe,
  UNLIMITED_RATES,
} from './probes.ts';
import { DEFAULT_PG_URL, killAllChildrenNow, REPO_ROOT, startServer } from './processes.ts';
import { type SeededTenant, seedTenant } from './seed.ts';

const USAGE = `usage: npm run bench:ab -- --base <dir> [options]
  --base <dir>          the other checkout (A); this one is B. It needs node_modules (a symlink)
  --row <row>           read | page | create | keyed (default read)
  --backend <b>         sqlite | postgres (default sqlite)
  --pairs <n>           window pairs (default 6)
  --seconds <s>         measured seconds per window (default 6)
  --warmup <s>          warm-up seconds per window (default 2)
  --connections <n>     concurrent connections (default 50)
  --pg-url <url>        PostgreSQL server to create the database on, 127.0.0.1 only
                        (default $BENCH_PG_URL or postgres://postgres@127.0.0.1:5432/test)
  --tracing <a|b>       that checkout's API exports every trace (sampler ratio 1, OTLP/HTTP
                        protobuf) to a collector on loopback that discards them
`;

const { values: args } = parseArgs({
  options: {
    base: { type: 'string' },
    row: { type: 'string', default: 'read' },
    backend: { type: 'string', default: 'sqlite' },
    pairs: { type: 'string', default: '6' },
    seconds: { type: 'string', default: '6' },
    warmup: { type: 'string', default: '2' },
    connections: { type: 'string', default: '50' },
    'pg-url': { type: 'string', default: DEFAULT_PG_URL },
    tracing: { type: 'string' },
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
} = checkoutOptions('bench:ab', USAGE, args);
const ROW = args.row;
if (!['read', 'page', 'create', 'keyed'].includes(ROW)) {
  usageError('--row must be read, page, create or keyed');
}
const SECONDS = integer('seconds', args.seconds, 1, 120);
const WARMUP = integer('warmup', args.warmup, 0, 60);
const CONNECTIONS = integer('connections', args.connections, 1, 1000);
const TRACING = args.tracing;
if (TRACING !== undefined && TRACING !== 'a' && TRACING !== 'b')
  usageError('--tracing must be a or b');

const migrations = (dir: string) =>
  readdirSync(join(dir, 'src', 'db', 'migrations'))
    .filter((name) => !name.endsWith('.test.ts'))
    .sort()
    .join(' ');
try {
  if (migrations(BASE) !== migrations(REPO_ROOT)) {
    usageError('the two checkouts have different migrations: one database cannot serve both');
  }
} catch (error) {
  if ((error as NodeJS.ErrnoException).code === 'ENOENT') usageError(`${BASE} is not a checkout`);
  throw error;
}

/** The row's request; a check of its answer runs before every window's load. */
function probeOf(tenant: SeededTenant): Probe {
  switch (ROW) {
    case 'page':
      return listProbe(tenant);
    case 'create':
    case 'keyed':
      return createClientProbe(tenant, ROW === 'keyed');
    default:
      return singleTripProbe(tenant);
  }
}

const database = await scratchDatabase(BACKEND, PG_URL, 'tourops-ab');

try {
  const { env } = database;
  const tenant = await seedTenant(env, ROW === 'page' || ROW === 'read' ? 1000 : 10);
  const probe = probeOf(tenant);
  const apiEnv = { ...env, LOG_LEVEL: 'warn', DEPLOYMENT_ENV: 'test', ...UNLIMITED_RATES };
  const envOf: Record<'A' | 'B', Record<string, string>> = { A: apiEnv, B: apiEnv };
  if (TRACING !== undefined) {
    // Takes every export and answers at once, as a collector that keeps up would.
    const collector = createServer((request, response) => {
      request.resume().on('end', () => response.writeHead(200).end());
    });
    await new Promise<void>((done) => collector.listen(0, '127.0.0.1', done));
    collector.unref();
    const port = (collector.address() as AddressInfo).port;
    envOf[TRACING === 'a' ? 'A' : 'B'] = {
      ...apiEnv,
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
      OTEL_TRACES_SAMPLER: 'traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '1',
    };
  }
  const checkouts = { A: BASE, B: REPO_ROOT } as const;
  console.log(
    `A = ${BASE}, B = ${REPO_ROOT}${TRACING ? `, ${TRACING.toUpperCase()} tracing` : ''}; ` +
      `${probe.label}, ${BACKEND}, ${CONNECTIONS} connections, ` +
      `${PAIRS} pairs of ${WARMUP} s + ${SECONDS} s windows`,
  );
  await runPairs(PAIRS, { rate: 'req/s', cpu: 'µs CPU a request' }, async (label, pair) => {
    const server = await startServer({
      name: `api ${label}`,
      entry: join(checkouts[label], 'src', 'main.ts'),
      env: envOf[label],
    });
    try {
      await checkProbe(server.baseUrl, probe);
      const window = await runWindow(server, {
        url: `${server.baseUrl}${probe.path}`,
        method: probe.method,
        headers: probe.headers,
        body: probe.body,
        perRequestHeaders: probe.perRequestHeaders,
        connections: CONNECTIONS,
        warmupSec: WARMUP,
        durationSec: SECONDS,
      });
      if (window.non2xx > 0 || window.errors > 0 || window.timeouts > 0) {
        throw new Error(
          `window ${pair} ${label}: ${window.non2xx} non-2xx answers, ${window.errors} errors, ${window.timeouts} timeouts`,
        );
      }
      if (window.serverCpuSec === null || window.requests === 0) {
        throw new Error(`window ${pair} ${label}: no CPU reading or no 2xx answer`);
      }
      return {
        cpuUs: (window.serverCpuSec * 1e6) / window.requests,
        rate: window.requests / window.wallSec,
      };
    } finally {
      await server.stop();
    }
  });
} finally {
  killAllChildrenNow();
  await database.drop();
}
