/**
 * `npm run bench:ab -- --base <dir>`: A/B of one request against two checkouts, for changes too
 * small for the noise between two `npm run bench` runs. Each window starts a fresh API from one
 * checkout, warms it, then measures it; the checkouts alternate window by window (A B, B A, …) on
 * the same seeded database, so a host that slows down for a while slows both. Reports the API's
 * CPU per request (from /proc, steadier than rates) and req/s of every window, and per pair the
 * ratio B/A (B is this checkout), with their geometric mean. `--loop open` sends at a fixed rate
 * instead (bench/open-loop.ts) and adds each window's p50 and p99, and the pairs' p99 B/A: the
 * tail of two checkouts told apart from the machine's.
 *
 *   git worktree add /tmp/base <rev> && ln -s "$PWD/node_modules" /tmp/base/node_modules
 *   npm run bench:ab -- --base /tmp/base --row read --backend postgres --pairs 6
 *   npm run bench:ab -- --base /tmp/base --row page --loop open --rate 1500
 *
 * Checkouts with the same migrations share one database, seeded once by this checkout; with
 * different ones, each has its own, migrated and seeded by its own code (bench/seed.ts).
 */
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { checkoutOptions, runPairs, scratchDatabase } from './ab-pairs.ts';
import {
  combine,
  errorKindWords,
  runOpenLoopWindow,
  runWindow,
  type Window,
  windowDisturbed,
} from './measure.ts';
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
  --loop <closed|open>  closed: each connection sends as soon as answered (default); open: at
                        --rate requests a second whatever the answers, latency from each
                        request's scheduled time
  --rate <n>            the open loop's requests a second (required with --loop open)
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
    loop: { type: 'string', default: 'closed' },
    rate: { type: 'string' },
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
const OPEN_LOOP = args.loop === 'open';
if (!OPEN_LOOP && args.loop !== 'closed') usageError('--loop must be closed or open');
const RATE = OPEN_LOOP
  ? integer('rate', args.rate ?? usageError('--loop open needs --rate'), 1, 100_000)
  : null;
const TRACING = args.tracing;
if (TRACING !== undefined && TRACING !== 'a' && TRACING !== 'b')
  usageError('--tracing must be a or b');

const migrations = (dir: string) =>
  readdirSync(join(dir, 'src', 'db', 'migrations'))
    .filter((name) => !name.endsWith('.test.ts'))
    .sort()
    .join(' ');
let sameMigrations: boolean;
try {
  sameMigrations = migrations(BASE) === migrations(REPO_ROOT);
} catch (error) {
  if ((error as NodeJS.ErrnoException).code === 'ENOENT') usageError(`${BASE} is not a checkout`);
  throw error;
}

/**
 * A tenant seeded by `checkout`'s own code (bench/seed.ts, in a process of its own), on a
 * database that code migrates: for a checkout whose schema is not this one's.
 */
function seededBy(checkout: string, env: Record<string, string>, trips: number): SeededTenant {
  const script = `const { seedTenant } = await import('./bench/seed.ts');
    process.stdout.write(JSON.stringify(await seedTenant(JSON.parse(process.env.AB_ENV), ${trips})));
    process.exit(0);`;
  const out = execFileSync(
    process.execPath,
    ['--import', 'tsx', '--input-type=module', '-e', script],
    { cwd: checkout, env: { PATH: process.env.PATH ?? '', AB_ENV: JSON.stringify(env) } },
  );
  return JSON.parse(out.toString('utf8').trim().split('\n').at(-1) ?? 'null') as SeededTenant;
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

const trips = ROW === 'page' || ROW === 'read' ? 1000 : 10;
const databases = {
  B: await scratchDatabase(BACKEND, PG_URL, 'tourops-ab'),
  A: sameMigrations ? null : await scratchDatabase(BACKEND, PG_URL, 'tourops-ab-a'),
};

try {
  const tenantB = await seedTenant(databases.B.env, trips);
  const tenantA = databases.A === null ? tenantB : seededBy(BASE, databases.A.env, trips);
  const probes = { A: probeOf(tenantA), B: probeOf(tenantB) };
  const probe = probes.B;
  const apiEnvOf = (env: Record<string, string>) => ({
    ...env,
    LOG_LEVEL: 'warn',
    DEPLOYMENT_ENV: 'test',
    ...UNLIMITED_RATES,
  });
  const apiEnv = apiEnvOf(databases.B.env);
  const envOf: Record<'A' | 'B', Record<string, string>> = {
    A: databases.A === null ? apiEnv : apiEnvOf(databases.A.env),
    B: apiEnv,
  };
  if (TRACING !== undefined) {
    // Takes every export and answers at once, as a collector that keeps up would.
    const collector = createServer((request, response) => {
      request.resume().on('end', () => response.writeHead(200).end());
    });
    await new Promise<void>((done) => collector.listen(0, '127.0.0.1', done));
    collector.unref();
    const port = (collector.address() as AddressInfo).port;
    const traced = TRACING === 'a' ? 'A' : 'B';
    envOf[traced] = {
      ...envOf[traced],
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
      OTEL_TRACES_SAMPLER: 'traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '1',
    };
  }
  const checkouts = { A: BASE, B: REPO_ROOT } as const;
  console.log(
    `A = ${BASE}, B = ${REPO_ROOT}${TRACING ? `, ${TRACING.toUpperCase()} tracing` : ''}; ` +
      `${probe.label}, ${BACKEND}, ${CONNECTIONS} connections` +
      `${OPEN_LOOP ? `, open loop at ${RATE} req/s` : ''}, ` +
      `${PAIRS} pairs of ${WARMUP} s + ${SECONDS} s windows` +
      `${sameMigrations ? '' : '; different migrations: a database each, seeded by its own code'}`,
  );
  await runPairs(PAIRS, { rate: 'req/s', cpu: 'µs CPU a request' }, async (label, pair) => {
    const server = await startServer({
      name: `api ${label}`,
      entry: join(checkouts[label], 'src', 'main.ts'),
      env: envOf[label],
    });
    try {
      const own = probes[label];
      await checkProbe(server.baseUrl, own);
      const load = {
        url: `${server.baseUrl}${own.path}`,
        method: own.method,
        headers: own.headers,
        body: own.body,
        connections: CONNECTIONS,
        warmupSec: WARMUP,
        durationSec: SECONDS,
      };
      const window: Window =
        RATE === null
          ? await runWindow(server, { ...load, perRequestHeaders: own.perRequestHeaders })
          : await runOpenLoopWindow(server, {
              ...load,
              method: own.method === 'POST' ? 'POST' : undefined,
              idempotencyKeys: own.perRequestHeaders !== undefined,
              rate: RATE,
            });
      if (window.non2xx > 0 || window.errors > 0 || window.timeouts > 0) {
        const kinds = errorKindWords(window);
        throw new Error(
          `window ${pair} ${label}: ${window.non2xx} non-2xx answers, ${window.errors} errors, ${window.timeouts} timeouts` +
            (kinds === '' ? '' : ` (${kinds})`),
        );
      }
      if (window.serverCpuSec === null || window.requests === 0) {
        throw new Error(`window ${pair} ${label}: no CPU reading or no 2xx answer`);
      }
      const tail = RATE === null ? undefined : combine(own.label, BACKEND, load.url, [window]);
      return {
        cpuUs: (window.serverCpuSec * 1e6) / window.requests,
        rate: window.requests / window.wallSec,
        tail: tail && { p50Ms: tail.p50, p99Ms: tail.p99, disturbed: windowDisturbed(window) },
      };
    } finally {
      await server.stop();
    }
  });
} finally {
  killAllChildrenNow();
  await databases.B.drop();
  await databases.A?.drop();
}
