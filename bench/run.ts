/**
 * `npm run bench`: HTTP benchmark of the API, bounded in time, loopback only.
 *
 * Every server under test is a child process running what `npm start` runs (`src/main.ts`,
 * here through tsx, configured through the environment), next to bare Fastify
 * reference servers started the same way (bench/reference-server.ts). autocannon runs here, in
 * this process. Data is seeded straight through Kysely before the servers start.
 *
 * What is compared is interleaved: all the servers of a backend run side by side (idle ones cost
 * nothing) and every probe is measured in rounds, A B C … A B C …, each window one autocannon
 * run whose first seconds (the warm-up: same connections, same load) are not counted. A slow
 * stretch of the machine therefore lands on both sides of a ratio instead of on one.
 *
 * Nothing is written into the repository: databases live in a temporary directory (SQLite) or in
 * throw-away databases (PostgreSQL), all removed at the end, and every child process is killed
 * however the run ends.
 *
 *   npm run bench -- [--duration 10] [--warmup 5] [--rounds 2] [--connections 50]
 *                    [--backend all|sqlite|postgres] [--log-level warn] [--profile]
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, cpus, platform, release, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import type { BesideJobOptions, BesideJobResult } from './beside-job.ts';
import { benchCapacity, CAPACITY_SUBSCRIPTIONS, type CapacityResult } from './capacity.ts';
import { benchChangeEmit, type ChangeEmitResult } from './change-emit.ts';
import {
  benchContention,
  CONTENTION_CONNECTIONS,
  type ContentionResult,
  MIXED_READ_RATE,
  MIXED_WRITE_RATE,
} from './contention.ts';
import { benchCrash, type CrashResult } from './crash.ts';
import {
  benchDeliveries,
  type DeliveryResult,
  PUSHBACK_CAPACITY,
  PUSHBACK_MS,
} from './deliveries.ts';
import { benchDeliveryScale, type ScaleResult } from './delivery-scale.ts';
import { benchErasure, type ErasureBenchResult } from './erasure.ts';
import { benchFanOut, type FanOutResult } from './fan-out.ts';
import {
  backgroundCpu,
  combine,
  DISTURBED_PCT,
  errorKindWords,
  isDisturbed,
  isValid,
  type Measurement,
  runOpenLoopWindow,
  runWindow,
  type Window,
  windowDisturbed,
} from './measure.ts';
import { usage } from './options.ts';
import {
  checkProbe,
  createClientProbe,
  expectJson,
  listProbe,
  type Probe,
  singleTripProbe,
  UNLIMITED_RATES,
} from './probes.ts';
import {
  DEFAULT_PG_URL,
  killAllChildrenNow,
  onLoopback,
  REPO_ROOT,
  type ServerProcess,
  startServer,
} from './processes.ts';
import { type CpuProfile, formatProfileSummary, summarizeProfile } from './profile.ts';
import { benchRetention, type RetentionResult } from './retention.ts';
import { type SeededTenant, seedTenant } from './seed.ts';
import { benchStartup, type StartupResult } from './startup.ts';

const USAGE = `usage: npm run bench -- [options]

  --duration <s>       measured seconds per row, split over the rounds (default 10)
  --warmup <s>         warm-up seconds before a row's first window (default 5; later windows 2)
  --rounds <n>         windows per row, interleaved with the other rows of the backend (default 2)
  --connections <n>    concurrent connections (default 50)
  --backend <b>        all | sqlite | postgres (default all; PostgreSQL rows are skipped if unreachable)
  --log-level <level>  LOG_LEVEL of the API under test (default warn; info logs one line per request)
  --small-trips <n>    trips of the small tenant (default 1000)
  --large-trips <n>    trips of the large tenant (default 100000)
  --pg-url <url>       PostgreSQL server to create the bench databases on, 127.0.0.1 only
                       (default $BENCH_PG_URL or postgres://postgres@127.0.0.1:5432/test)
  --retries <n>        windows repeated, in all (0-10), because other processes took CPU during
                       them (default 2)
  --only <what>        all | http | contention | deliveries | retention | erasure | scale | capacity |
                       startup
                       (default all; scale and capacity are PostgreSQL only, startup SQLite only)
  --deliveries <n>     events per webhook delivery run, each delivered to 4 subscriptions
                       (default 5000)
  --scale-history <n>  delivered rows the scale row grows the table to (default 1000000)
  --scale-deliveries <n>  deliveries the scale row works off with two workers (default 100000)
  --capacity-deliveries <n>  deliveries each capacity backlog run sends (default 20000)
  --capacity-history <n>  delivered rows the capacity claim row grows the table to (default 10000000)
  --profile            record a CPU profile of every server during its last window and summarize
                       it (slows the servers down: a profiled run is not the benchmark)
`;

const { values: args } = parseArgs({
  options: {
    duration: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '2' },
    connections: { type: 'string', default: '50' },
    backend: { type: 'string', default: 'all' },
    'log-level': { type: 'string', default: 'warn' },
    'small-trips': { type: 'string', default: '1000' },
    'large-trips': { type: 'string', default: '100000' },
    'pg-url': { type: 'string' },
    retries: { type: 'string', default: '2' },
    profile: { type: 'boolean', default: false },
    only: { type: 'string', default: 'all' },
    deliveries: { type: 'string', default: '5000' },
    'scale-history': { type: 'string', default: '1000000' },
    'scale-deliveries': { type: 'string', default: '100000' },
    'capacity-deliveries': { type: 'string', default: '20000' },
    'capacity-history': { type: 'string', default: '10000000' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});

if (args.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}

const { usageError, integer } = usage('bench', USAGE);

const DURATION = integer('duration', args.duration, 1, 600);
const WARMUP = integer('warmup', args.warmup, 1, 600);
const ROUNDS = integer('rounds', args.rounds, 1, 10);
const ROUND_WARMUP = Math.min(2, WARMUP);
const CONNECTIONS = integer('connections', args.connections, 1, 1000);
const SMALL_TRIPS = integer('small-trips', args['small-trips'], 1, 10_000_000);
const LARGE_TRIPS = integer('large-trips', args['large-trips'], 1, 10_000_000);
const RETRIES = integer('retries', args.retries, 0, 10);
const PROFILE = args.profile;
const LOG_LEVEL = args['log-level'];
if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(LOG_LEVEL)) {
  usageError('--log-level must be a pino level (warn, info, …)');
}
const ONLY = args.only;
if (
  ![
    'all',
    'http',
    'contention',
    'deliveries',
    'retention',
    'erasure',
    'scale',
    'capacity',
    'startup',
  ].includes(ONLY)
)
  usageError(
    '--only must be all, http, contention, deliveries, retention, erasure, scale, capacity or startup',
  );
const HTTP_ROWS = ONLY === 'all' || ONLY === 'http';
const CONTENTION_ROWS = ONLY === 'all' || ONLY === 'contention';
const DELIVERY_ROWS = ONLY === 'all' || ONLY === 'deliveries';
const RETENTION_ROWS = ONLY === 'all' || ONLY === 'retention';
const ERASURE_ROWS = ONLY === 'all' || ONLY === 'erasure';
const SCALE_ROWS = ONLY === 'all' || ONLY === 'scale';
const CAPACITY_ROWS = ONLY === 'all' || ONLY === 'capacity';
const STARTUP_ROWS = ONLY === 'all' || ONLY === 'startup';
/** Processes each start-up row starts, each way (its median is reported). */
const STARTUP_RUNS = 7;
// Multiples of the 20 subscriptions × 2 (half the history is written first).
const SCALE_HISTORY = integer('scale-history', args['scale-history'], 40_000, 10_000_000);
const SCALE_DELIVERIES = integer('scale-deliveries', args['scale-deliveries'], 1_000, 1_000_000);
if (SCALE_HISTORY % 40 !== 0 || SCALE_DELIVERIES % 20 !== 0) {
  usageError('--scale-history must be a multiple of 40, --scale-deliveries of 20');
}
const CAPACITY_DELIVERIES = integer(
  'capacity-deliveries',
  args['capacity-deliveries'],
  10_000,
  1_000_000,
);
const CAPACITY_HISTORY = integer('capacity-history', args['capacity-history'], 100_000, 20_000_000);
if (CAPACITY_DELIVERIES % CAPACITY_SUBSCRIPTIONS !== 0 || CAPACITY_HISTORY % 20 !== 0) {
  usageError('--capacity-deliveries and --capacity-history must be multiples of 20');
}
/** Deliveries past retention that the retention row purges. */
const RETENTION_PURGED = 200_000;
/** The retention row's target: the read's p99 during the purge at most this times without. */
const RETENTION_P99_FACTOR = 2;
/** Client events of the tenant whose client the erasure row erases. */
const ERASURE_EVENTS = 100_000;
/** The erasure row's target: another tenant's read p99 during it at most this times without. */
const ERASURE_P99_FACTOR = 2;
const DELIVERY_EVENTS = integer('deliveries', args.deliveries, 100, 1_000_000);
/** Events a fan-out run emits, each to 100 subscriptions (bench/fan-out.ts). */
const FAN_OUT_EVENTS = 300;
const BACKEND = args.backend;
if (!['all', 'sqlite', 'postgres'].includes(BACKEND)) {
  usageError('--backend must be all, sqlite or postgres');
}
const PG_URL = args['pg-url'] ?? DEFAULT_PG_URL;
if (!onLoopback(PG_URL)) {
  usageError('--pg-url must be a postgres:// URL on 127.0.0.1 (loopback only)');
}

/**
 * Latency targets are the open-loop rows' (issue 13): at 50 connections in a closed loop the p99
 * is queueing (50 clients × 0.4 ms a page is 20 ms already), so those rows report it untargeted.
 * The rate is a share of the closed-loop maximum.
 */
const OPEN_LOOP_SHARE = 0.5;
const P99_TARGET_MS = 10;
const PAGE_P99_TARGET_MS = 20;
const CORES = availableParallelism();
/** `tourops serve --processes auto` against one process, single read, SQLite. */
const SCALING_TARGET = 1.6;
const LARGE_COST_TARGET = 1.1;
/** A page of 50 against a bare Fastify route with the same SQL and schema: cost at most this. */
const PAGE_COST_TARGET = 1.3;
/** The single read with rate limiting against the same with it stubbed out. */
const RATE_LIMIT_TARGET = 0.95;
/** A create with a fresh Idempotency-Key against the same create without: cost at most this. */
const KEYED_COST_TARGET = 1.4;
/** The backlog run against bare POSTs to the same receiver, and the API's CPU per delivery. */
const BACKLOG_CEILING_TARGET = 0.9;
const BACKLOG_CPU_TARGET_US = 80;
/** Keyed creates of one tenant at 32 connections against unkeyed ones: req/s at least this. */
const CONTENTION_TARGET = 0.7;
/** Machine load (percent of one core) under which the machine counts as quiet. */
const QUIET_PCT = 15;

const log = (message: string) => process.stderr.write(`[bench] ${message}\n`);
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

// ---------------------------------------------------------------------------------------------
// Lifetime: a hard deadline, signals, and clean-up that always runs.

const cleanups: Array<() => Promise<void>> = [];
const running = new Set<ServerProcess>();
let cleaning: Promise<void> | null = null;

async function stopServers(): Promise<void> {
  for (const server of running) await server.stop().catch(() => undefined);
  running.clear();
}

function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    await stopServers();
    killAllChildrenNow();
    for (const step of cleanups.reverse()) {
      try {
        await step();
      } catch (error) {
        log(`clean-up step failed: ${(error as Error).message}`);
      }
    }
  })();
  return cleaning;
}

function abort(reason: string, code: number): void {
  log(reason);
  const hard = setTimeout(() => process.exit(code), 20_000);
  hard.unref();
  void cleanup().finally(() => process.exit(code));
}

process.on('SIGINT', () =>
  abort('interrupted: stopping servers and removing bench databases', 130),
);
process.on('SIGTERM', () =>
  abort('terminated: stopping servers and removing bench databases', 143),
);

// Rows per backend: a reference, the single read, two list pages (+ on SQLite: /healthz, a bare
// route with the read's SQL and schema, the read with rate limiting stubbed out, and a POST
// without and with an Idempotency-Key).
const backendsPlanned = (BACKEND !== 'postgres' ? 1 : 0) + (BACKEND !== 'sqlite' ? 1 : 0);
const rowsPlanned = HTTP_ROWS
  ? (BACKEND !== 'postgres' ? 11 : 0) + (BACKEND !== 'sqlite' ? 6 : 0)
  : 0;
/** The open-loop rows: one window each of the three read rows per backend. */
const openLoopSec = HTTP_ROWS ? backendsPlanned * 3 * (DURATION + ROUND_WARMUP + 3) : 0;
// Per backend and round: the ceiling and three backlog runs (backlog write, start-up, delivery, stop).
const deliverySec = DELIVERY_ROWS
  ? backendsPlanned * (ROUNDS * 4 * ((DELIVERY_EVENTS * 4) / 500 + 15) + 60)
  : 0;
const windowSec = DURATION / ROUNDS + ROUND_WARMUP + 1;
// Per backend: seeding, a warm-up, two windows without the purge and one during it.
const retentionSec = RETENTION_ROWS ? backendsPlanned * (WARMUP + 2 * DURATION + 360) : 0;
// The same for the erasure row.
const erasureSec = ERASURE_ROWS ? backendsPlanned * (WARMUP + 2 * DURATION + 360) : 0;
// Per backend: seeding, the two create rows' windows, and the mixed window.
const contentionSec = CONTENTION_ROWS
  ? backendsPlanned * (30 + 2 * (WARMUP + ROUNDS * windowSec) + WARMUP + DURATION + 10)
  : 0;
// Three rows, two ways, a few seconds a process at most.
const startupSec = STARTUP_ROWS && BACKEND !== 'postgres' ? 3 * 2 * STARTUP_RUNS * 8 + 30 : 0;
// Seeding about 40k rows a second, the claims, and the backlog run at a few thousand a second.
const scaleSec =
  SCALE_ROWS && BACKEND !== 'sqlite' ? SCALE_HISTORY / 20_000 + SCALE_DELIVERIES / 500 + 120 : 0;
// Three backlog runs at a thousand or more a second, and seeding the history at about 15k rows a second.
const capacitySec =
  CAPACITY_ROWS && BACKEND !== 'sqlite'
    ? (3 * CAPACITY_DELIVERIES) / 500 + CAPACITY_HISTORY / 15_000 + 180
    : 0;
const budgetSec = Math.ceil(
  rowsPlanned * (WARMUP + ROUNDS * windowSec) +
    RETRIES * (windowSec + 10) +
    deliverySec +
    contentionSec +
    retentionSec +
    erasureSec +
    scaleSec +
    capacitySec +
    startupSec +
    openLoopSec +
    180,
);
setTimeout(
  () => abort(`time limit of ${budgetSec} s reached: giving up`, 1),
  budgetSec * 1000,
).unref();

// ---------------------------------------------------------------------------------------------
// Probes, rounds, windows.

interface Job {
  probe: Probe;
  server: ServerProcess;
  backend: string;
  dbProcessName?: string;
  windows: Window[];
  profile?: string;
}

const measurements: Measurement[] = [];
const deliveryResults: DeliveryResult[] = [];
const crashResults: CrashResult[] = [];
const fanOutResults: FanOutResult[] = [];
const changeEmitResults: ChangeEmitResult[] = [];
const retentionResults: RetentionResult[] = [];
const erasureResults: ErasureBenchResult[] = [];
const startupResults: StartupResult[] = [];
const contentionResults: ContentionResult[] = [];
const scaleResults: ScaleResult[] = [];
const capacityResults: CapacityResult[] = [];
const profiles: string[] = [];
const profileDir = PROFILE ? mkdtempSync(join(tmpdir(), 'tourops-bench-prof-')) : null;
if (profileDir) cleanups.push(async () => rmSync(profileDir, { recursive: true, force: true }));
let retriesLeft = RETRIES;
let profileCount = 0;

/** Waits (bounded) until the machine is nearly idle: other sessions' load skews every number. */
async function waitForQuiet(maxMs: number): Promise<void> {
  const deadline = Date.now() + maxMs;
  while (Date.now() < deadline) {
    const busy = await backgroundCpu(1000);
    if (busy === null || busy < QUIET_PCT) return;
  }
  log(`  the machine is still busy after ${maxMs / 1000} s: measuring anyway`);
}

async function measureWindow(job: Job, round: number): Promise<void> {
  const warmupSec = round === 0 ? WARMUP : ROUND_WARMUP;
  const durationSec = DURATION / ROUNDS;
  const profileThis = PROFILE && round === ROUNDS - 1;
  for (;;) {
    let profiling: Promise<void> | null = null;
    const window = await runWindow(
      job.server,
      {
        url: `${job.server.baseUrl}${job.probe.path}`,
        method: job.probe.method,
        headers: job.probe.headers,
        body: job.probe.body,
        perRequestHeaders: job.probe.perRequestHeaders,
        connections: CONNECTIONS,
        warmupSec,
        durationSec,
      },
      {
        dbProcessName: job.dbProcessName,
        onMeasureStart: profileThis
          ? () => {
              profiling = job.server.startCpuProfile();
            }
          : undefined,
      },
    );
    if (profiling && profileDir) {
      await profiling;
      const file = join(profileDir, `${profileCount++}.cpuprofile`);
      await job.server.stopCpuProfile(file);
      const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
      job.profile = formatProfileSummary(
        `${job.probe.label} (${job.backend})`,
        summarizeProfile(profile),
        window.requests,
      );
    }
    const disturbed = windowDisturbed(window);
    log(
      `  ${job.probe.label}: ${fmtInt(window.requests / window.wallSec)} req/s` +
        (disturbed ? '  (other processes took CPU)' : ''),
    );
    if (!disturbed || retriesLeft <= 0) {
      job.windows.push(window);
      return;
    }
    retriesLeft--;
    log('  waiting for a quiet machine, then measuring this window again');
    await waitForQuiet(10_000);
  }
}

/** Verifies every probe, then measures them in interleaved rounds. */
async function measureJobs(jobs: Job[]): Promise<Measurement[]> {
  for (const job of jobs) await checkProbe(job.server.baseUrl, job.probe);
  for (let round = 0; round < ROUNDS; round++) {
    log(
      `${jobs[0].backend}: round ${round + 1}/${ROUNDS}: ${round === 0 ? WARMUP : ROUND_WARMUP} s warm-up + ` +
        `${fmtSec(DURATION / ROUNDS)} s measured per row`,
    );
    for (const job of jobs) await measureWindow(job, round);
  }
  return jobs.map((job) => {
    const m = combine(
      job.probe.label,
      job.backend,
      `${job.server.baseUrl}${job.probe.path}`,
      job.windows,
    );
    measurements.push(m);
    if (job.profile) profiles.push(job.profile);
    if (!isValid(m)) {
      log(`  ${m.label}: INVALID: ${m.non2xx} non-2xx, ${m.errors} errors, ${m.timeouts} timeouts`);
    }
    return m;
  });
}

/** One open-loop window at a fixed request rate (see runOpenLoopWindow). */
async function measureOpenLoop(
  job: Job,
  rate: number,
): Promise<{ m: Measurement; generatorStallMs: number; markCompacts: string }> {
  log(`  ${job.probe.label}: open loop at ${fmtInt(rate)} req/s`);
  // The other servers of the run are paused for the window: their bursts of CPU on the shared
  // cores put tens to hundreds of ms into the tail (bench/README), and this row measures the tail
  // of one API (with its database and the generator), not theirs.
  const others = [...running].filter((server) => server !== job.server);
  for (const server of others) server.pause();
  let window: Window;
  try {
    await waitForQuiet(10_000);
    window = await runOpenLoopWindow(
      job.server,
      {
        url: `${job.server.baseUrl}${job.probe.path}`,
        headers: job.probe.headers,
        connections: CONNECTIONS,
        rate,
        warmupSec: ROUND_WARMUP,
        durationSec: DURATION,
      },
      { dbProcessName: job.dbProcessName },
    );
  } finally {
    for (const server of others) server.resume();
  }
  const generatorStallMs = window.generatorStallMs ?? 0;
  const compacts = window.serverMarkCompacts ?? Number.NaN;
  const markCompacts = Number.isFinite(compacts) ? String(compacts) : 'unknown';
  const m = combine(
    `${job.probe.label}, open loop at ${fmtInt(rate)} req/s`,
    job.backend,
    `${job.server.baseUrl}${job.probe.path}`,
    [window],
  );
  measurements.push(m);
  if (m.errors > 0) {
    const kinds = errorKindWords(window);
    log(`    ${fmtInt(m.errors)} errors: ${kinds || 'of no kind the generator kept'}`);
  }
  log(
    `    p50 ${fmtMs(m.p50)} ms; the generator's longest pause ${fmtMs(generatorStallMs)} ms; ` +
      `the API's mark-compacts ${markCompacts}`,
  );
  return { m, generatorStallMs, markCompacts };
}

// ---------------------------------------------------------------------------------------------
// The API and reference servers.

/**
 * `BENCH_REDIS_URL` (e.g. redis://127.0.0.1:6379) runs the PostgreSQL API with its rate-limit
 * counters in Redis, the scale-out configuration; unset, PostgreSQL holds them (the default).
 */
const BENCH_REDIS_URL = process.env.BENCH_REDIS_URL;
if (BENCH_REDIS_URL && !/^redis:\/\/127\.0\.0\.1(:\d+)?\/?$/.test(BENCH_REDIS_URL)) {
  throw new Error('BENCH_REDIS_URL must point at 127.0.0.1');
}

function apiEnv(database: Record<string, string>): Record<string, string> {
  return {
    ...database,
    ...(BENCH_REDIS_URL && database.DATABASE_URL ? { REDIS_URL: BENCH_REDIS_URL } : {}),
    LOG_LEVEL,
    DEPLOYMENT_ENV: 'test',
    ...UNLIMITED_RATES,
  };
}

/** A server a bench part started (live) or stopped: stopped with the others on an abort. */
function track(server: ServerProcess, live: boolean): void {
  if (live) running.add(server);
  else running.delete(server);
}

async function start(
  name: string,
  entry: 'src/main.ts' | 'bench/reference-server.ts' | 'bin/tourops.js',
  env: Record<string, string>,
  args?: string[],
): Promise<ServerProcess> {
  const server = await startServer({ name, entry, env, args });
  running.add(server);
  return server;
}

// ---------------------------------------------------------------------------------------------
// Summary rows.

interface Row {
  scenario: string;
  backend: string;
  m: Measurement;
  ref?: Measurement;
  ratioTarget?: number;
  targetText: string;
  /** No target: "met" shows only whether the run was valid (and disturbed). */
  informational?: boolean;
  /** The p99 target, ms (open-loop rows); none when absent. */
  p99TargetMs?: number;
}
const rows: Row[] = [];

async function benchBackend(
  backend: 'SQLite' | 'PostgreSQL',
  small: SeededTenant,
  large: SeededTenant,
  smallDb: Record<string, string>,
  largeDb: Record<string, string>,
  /** Where the write rows run (SQLite only): their WAL growth must not slow the read rows. */
  writes?: { tenant: SeededTenant; db: Record<string, string> },
): Promise<void> {
  const dbProcessName = backend === 'PostgreSQL' ? 'postgres' : undefined;
  try {
    const reference =
      backend === 'SQLite'
        ? await start('reference-json', 'bench/reference-server.ts', { REFERENCE: 'json' })
        : await start('reference-pg', 'bench/reference-server.ts', {
            REFERENCE: 'pg',
            DATABASE_URL: smallDb.DATABASE_URL,
            POOL_SIZE: '10',
          });
    // The page's floor: the same keyset SQL and response schema on a bare Fastify route.
    const pageReference =
      backend === 'SQLite'
        ? await start('reference-page', 'bench/reference-server.ts', {
            REFERENCE: 'page-sqlite',
            DATA_DIR: smallDb.DATA_DIR,
          })
        : reference;
    const apiSmall = await start(`api-${backend}-small`, 'src/main.ts', apiEnv(smallDb));
    const apiLarge = await start(`api-${backend}-large`, 'src/main.ts', apiEnv(largeDb));
    // All cores: the same API as `tourops serve --processes auto`, on the small tenant's data.
    const apiCluster = await start(`api-${backend}-processes`, 'bin/tourops.js', apiEnv(smallDb), [
      'serve',
      '--processes',
      'auto',
    ]);
    const job = (server: ServerProcess, probe: Probe): Job => ({
      probe,
      server,
      backend,
      dbProcessName,
      windows: [],
    });

    const jobs: Job[] = [
      job(
        reference,
        backend === 'SQLite'
          ? {
              label: 'reference: bare Fastify constant JSON',
              path: '/',
              check: expectJson((json) => (json.hello === 'world' ? null : 'unexpected body')),
            }
          : {
              label: 'reference: bare Fastify + pg primary-key query',
              path: `/trips/${small.tripId}`,
              check: expectJson((json) =>
                (json.data as { id?: string } | undefined)?.id === small.tripId
                  ? null
                  : 'not the trip',
              ),
            },
      ),
    ];
    if (backend === 'SQLite') {
      // Diagnostic (details table only): the API's own HTTP stack (hooks, request id, logger,
      // router) on a route without authentication or database.
      jobs.push(
        job(apiSmall, {
          label: 'diagnostic: API GET /healthz (no auth, no DB)',
          path: '/healthz',
          check: expectJson((json) => (json.status === 'ok' ? null : 'unexpected body')),
        }),
      );
    }
    if (backend === 'SQLite') {
      // Diagnostic: the single read's own floor, its SQL and response schema on a bare route.
      jobs.push(
        job(pageReference, {
          label: 'diagnostic: bare Fastify, the same SQLite read and schema',
          path: `/trips/${small.tripId}?tenant=${small.tenantId}`,
          check: expectJson((json) =>
            (json.data as { id?: string } | undefined)?.id === small.tripId ? null : 'not the trip',
          ),
        }),
      );
    }
    // Rate limiting's cost (memory store): the same read on a child whose limiter is stubbed out.
    const apiNoLimits =
      backend === 'SQLite'
        ? await start(`api-${backend}-no-rate-limits`, 'src/main.ts', {
            ...apiEnv(smallDb),
            BENCH_RATE_LIMITS: 'off',
          })
        : null;
    if (apiNoLimits) {
      jobs.push(
        job(apiNoLimits, {
          ...singleTripProbe(small),
          label: 'GET /api/v1/trips/{id}, rate limiting stubbed out',
        }),
      );
    }
    // Idempotency's cost: the same create without and with a unique key (each request inserts a
    // client; enterprise tenants have no client quota).
    const apiWrites = writes
      ? await start(`api-${backend}-writes`, 'src/main.ts', apiEnv(writes.db))
      : null;
    const writeJobs =
      writes && apiWrites
        ? [
            job(apiWrites, createClientProbe(writes.tenant, false)),
            job(apiWrites, createClientProbe(writes.tenant, true)),
          ]
        : [];
    jobs.push(...writeJobs);
    const middleId = Buffer.from(small.middleCursor, 'base64url').toString('utf8').split(':')[1];
    jobs.push(
      job(pageReference, {
        label: 'reference: bare Fastify, the same page SQL and schema, 1,000 trips',
        path: `/page?tenant=${small.tenantId}&after=${middleId}`,
        check: expectJson((json) =>
          Array.isArray(json.data) && json.data.length === 50 ? null : 'not a page of 50',
        ),
      }),
    );
    jobs.push(
      job(apiCluster, {
        ...singleTripProbe(small),
        label: `GET /api/v1/trips/{id}, serve --processes auto (${CORES})`,
      }),
    );
    jobs.push(
      job(apiSmall, singleTripProbe(small)),
      job(apiSmall, listProbe(small)),
      job(apiLarge, listProbe(large)),
    );

    // Production servers take keyed writes between reads: once one has run, the process's
    // AsyncLocalStorage (ambient transactions) is live and every later promise pays for it. The
    // read servers get one keyed write each so their numbers include that cost; the write rows
    // run on their own database, so the WAL they grow never slows a read row.
    const readServers: Array<[ServerProcess, SeededTenant]> = [
      [apiSmall, small],
      [apiLarge, large],
      [apiCluster, small],
      ...(apiNoLimits ? [[apiNoLimits, small] as [ServerProcess, SeededTenant]] : []),
    ];
    for (const [server, tenant] of readServers) {
      await checkProbe(server.baseUrl, createClientProbe(tenant, true));
    }

    const noLimitsIndex = jobs.findIndex((j) => j.server === apiNoLimits);
    const clusterIndex = jobs.findIndex((j) => j.server === apiCluster);
    const pageReferenceIndex = jobs.findIndex((j) => j.probe.path.startsWith('/page?'));
    const results = await measureJobs(jobs);
    const [refM] = results;
    const [single, smallList, largeList] = results.slice(-3);
    const [postPlain, postKeyed] = writeJobs.map((w) => results[jobs.indexOf(w)]);
    if (apiNoLimits) {
      rows.push({
        scenario: 'Authenticated `GET /api/v1/trips/{id}`, rate limiting on (memory) vs off',
        backend,
        m: single,
        ref: results[noLimitsIndex],
        ratioTarget: RATE_LIMIT_TARGET,
        targetText: `ratio ≥ ${RATE_LIMIT_TARGET.toFixed(2)} (limiting costs < ${Math.round((1 - RATE_LIMIT_TARGET) * 100)}%)`,
      });
    }

    const targetRatio = backend === 'SQLite' ? 0.5 : 0.75;
    rows.push(
      {
        scenario:
          backend === 'SQLite'
            ? 'Authenticated `GET /api/v1/trips/{id}` vs bare Fastify JSON route'
            : 'Authenticated `GET /api/v1/trips/{id}` vs bare Fastify + one `pg` PK query',
        backend,
        m: single,
        ref: refM,
        ratioTarget: targetRatio,
        targetText: `ratio ≥ ${targetRatio.toFixed(2)}`,
      },
      {
        scenario: `\`GET /api/v1/trips?limit=50\` mid-list page, tenant with ${fmtInt(small.trips)} trips`,
        backend,
        m: smallList,
        targetText: 'informational (its latency target is the open-loop row)',
        informational: true,
      },
      {
        scenario: `\`GET /api/v1/trips?limit=50\` mid-list page, tenant with ${fmtInt(large.trips)} trips (ref: the ${fmtInt(small.trips)}-trip page)`,
        backend,
        m: largeList,
        ref: smallList,
        ratioTarget: 1 / LARGE_COST_TARGET,
        targetText: `ratio ≥ ${(1 / LARGE_COST_TARGET).toFixed(2)} (cost ≤ ${LARGE_COST_TARGET}×)`,
      },
    );
    rows.push({
      scenario: `Authenticated \`GET /api/v1/trips/{id}\`, \`tourops serve --processes auto\` (${CORES} processes) vs one process`,
      backend,
      m: results[clusterIndex],
      ref: single,
      ...(backend === 'SQLite'
        ? {
            ratioTarget: SCALING_TARGET,
            targetText: `ratio ≥ ${SCALING_TARGET.toFixed(2)} (scaling)`,
          }
        : {
            targetText: 'informational (PostgreSQL shares the cores)',
            informational: true,
          }),
    });
    rows.push({
      scenario: `\`GET /api/v1/trips?limit=50\` mid-list page, ${fmtInt(small.trips)} trips, vs a bare Fastify route with the same SQL and response schema`,
      backend,
      m: smallList,
      ref: results[pageReferenceIndex],
      ratioTarget: 1 / PAGE_COST_TARGET,
      targetText: `ratio ≥ ${(1 / PAGE_COST_TARGET).toFixed(2)} (cost ≤ ${PAGE_COST_TARGET}×)`,
    });
    // Latency at a load the server keeps up with: each read row again at half its maximum.
    const openLoop: Array<[Job, Measurement, number]> = [
      [job(apiSmall, singleTripProbe(small)), single, P99_TARGET_MS],
      [job(apiSmall, listProbe(small)), smallList, PAGE_P99_TARGET_MS],
      [job(apiLarge, listProbe(large)), largeList, PAGE_P99_TARGET_MS],
    ];
    for (const [openJob, closed, p99Target] of openLoop) {
      const rate = Math.max(1, Math.round(closed.rps * OPEN_LOOP_SHARE));
      const { m, generatorStallMs, markCompacts } = await measureOpenLoop(openJob, rate);
      rows.push({
        scenario: `Open loop at ${fmtInt(rate)} req/s (${OPEN_LOOP_SHARE * 100}% of the closed-loop maximum): ${openJob.probe.label}; the generator paused up to ${fmtMs(generatorStallMs)} ms; the API ran ${markCompacts} mark-compacts`,
        backend,
        m,
        targetText: `p99 < ${p99Target} ms`,
        p99TargetMs: p99Target,
      });
    }
    if (postPlain && postKeyed) {
      rows.push({
        scenario: '`POST /api/v1/clients` with a unique `Idempotency-Key` vs without',
        backend,
        m: postKeyed,
        ref: postPlain,
        ratioTarget: 1 / KEYED_COST_TARGET,
        targetText: `ratio ≥ ${(1 / KEYED_COST_TARGET).toFixed(2)} (cost ≤ ${KEYED_COST_TARGET}×)`,
      });
    }
  } finally {
    await stopServers();
  }
}

// ---------------------------------------------------------------------------------------------
// Backends.

async function benchSqlite(): Promise<null> {
  const root = mkdtempSync(join(tmpdir(), 'tourops-bench-'));
  cleanups.push(async () => rmSync(root, { recursive: true, force: true }));
  if (HTTP_ROWS) {
    const smallDb = { DATA_DIR: join(root, 'small') };
    const largeDb = { DATA_DIR: join(root, 'large') };
    log(`SQLite: seeding ${fmtInt(SMALL_TRIPS)} and ${fmtInt(LARGE_TRIPS)} trips in ${root}`);
    const small = await seedTenant(smallDb, SMALL_TRIPS);
    const large = await seedTenant(largeDb, LARGE_TRIPS);
    log(`SQLite: seeded in ${seconds(small.seedMs)} and ${seconds(large.seedMs)}`);
    const writesDb = { DATA_DIR: join(root, 'writes') };
    const writer = await seedTenant(writesDb, 10);
    await benchBackend('SQLite', small, large, smallDb, largeDb, { tenant: writer, db: writesDb });
  }
  if (CONTENTION_ROWS) await contentionRows('SQLite', { DATA_DIR: join(root, 'contention') });
  if (DELIVERY_ROWS) await deliveryRows('SQLite', { DATA_DIR: join(root, 'deliveries') });
  if (RETENTION_ROWS) await retentionRows('SQLite', { DATA_DIR: join(root, 'retention') });
  if (ERASURE_ROWS) await erasureRows('SQLite', { DATA_DIR: join(root, 'erasure') });
  if (STARTUP_ROWS) {
    await waitForQuiet(10_000);
    log(`start-up: ${STARTUP_RUNS} processes a row, each way`);
    startupResults.push(...(await benchStartup(STARTUP_RUNS)));
  }
  return null;
}

/** What the rows measured beside a worker's job (bench/beside-job.ts) take from this run. */
function besideJob(backend: string, dbEnv: Record<string, string>): BesideJobOptions {
  return {
    backend,
    dbEnv,
    apiEnv: apiEnv({}),
    connections: CONNECTIONS,
    warmupSec: WARMUP,
    durationSec: DURATION,
    dbProcessName: backend === 'PostgreSQL' ? 'postgres' : undefined,
    log,
    track,
  };
}

async function retentionRows(backend: string, dbEnv: Record<string, string>): Promise<void> {
  await waitForQuiet(10_000);
  log(`${backend}: retention purge of ${fmtInt(RETENTION_PURGED)} deliveries under load`);
  retentionResults.push(
    await benchRetention({ ...besideJob(backend, dbEnv), rows: RETENTION_PURGED }),
  );
}

async function erasureRows(backend: string, dbEnv: Record<string, string>): Promise<void> {
  await waitForQuiet(10_000);
  log(`${backend}: an erasure over ${fmtInt(ERASURE_EVENTS)} events under another tenant's load`);
  erasureResults.push(await benchErasure({ ...besideJob(backend, dbEnv), events: ERASURE_EVENTS }));
}

async function contentionRows(backend: string, dbEnv: Record<string, string>): Promise<void> {
  await waitForQuiet(10_000);
  log(`${backend}: contention, ${CONTENTION_CONNECTIONS} clients of one tenant`);
  const result = await benchContention({
    backend,
    dbEnv,
    logLevel: LOG_LEVEL,
    rounds: ROUNDS,
    warmupSec: WARMUP,
    durationSec: DURATION,
    dbProcessName: backend === 'PostgreSQL' ? 'postgres' : undefined,
    log,
    track,
  });
  measurements.push(result.plain, result.keyed, result.reads, ...result.writers);
  contentionResults.push(result);
}

async function deliveryRows(backend: string, dbEnv: Record<string, string>): Promise<void> {
  await waitForQuiet(10_000);
  log(`${backend}: webhook deliveries, ${fmtInt(DELIVERY_EVENTS)} events × 4 subscriptions a run`);
  deliveryResults.push(
    await benchDeliveries({
      backend,
      dbEnv,
      events: DELIVERY_EVENTS,
      rounds: ROUNDS,
      logLevel: LOG_LEVEL,
      profileDir,
      log,
      track,
    }),
  );
  log(`${backend}: a worker killed mid-backlog and restarted`);
  crashResults.push(await benchCrash({ backend, dbEnv, log, track }));
  // Last: its subscriptions point nowhere, and no worker may meet them.
  log(`${backend}: fan-out to 100 subscriptions, with and without payload filters`);
  fanOutResults.push(
    await benchFanOut({ backend, dbEnv, events: FAN_OUT_EVENTS, rounds: Math.max(ROUNDS, 5), log }),
  );
  log(`${backend}: a change with its object and changes at emit`);
  changeEmitResults.push(
    await benchChangeEmit({ backend, dbEnv, changes: 500, rounds: Math.max(ROUNDS, 5), log }),
  );
}

async function adminQuery(text: string): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 3000 });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

/** Returns a note when PostgreSQL is unreachable (its rows are skipped). */
async function benchPostgres(): Promise<string | null> {
  try {
    await adminQuery('select 1');
  } catch (error) {
    return `PostgreSQL at ${new URL(PG_URL).host} is unreachable (${(error as Error).message}): PostgreSQL rows skipped.`;
  }
  const base = `tourops_bench_${Date.now()}_${randomBytes(3).toString('hex')}`;
  const root = mkdtempSync(join(tmpdir(), 'tourops-bench-pg-'));
  cleanups.push(async () => rmSync(root, { recursive: true, force: true }));
  const secret = randomBytes(32).toString('hex');
  const databases: Record<string, string>[] = [];
  const suffixes = [
    ...(HTTP_ROWS ? ['small', 'large', 'writes'] : []),
    ...(CONTENTION_ROWS ? ['contention'] : []),
    ...(DELIVERY_ROWS ? ['deliveries'] : []),
    ...(RETENTION_ROWS ? ['retention'] : []),
    ...(ERASURE_ROWS ? ['erasure'] : []),
    ...(SCALE_ROWS ? ['scale'] : []),
  ];
  for (const suffix of suffixes) {
    const name = `${base}_${suffix}`;
    await adminQuery(`create database ${name}`);
    cleanups.push(async () => {
      await adminQuery(`drop database if exists ${name} with (force)`);
      log(`PostgreSQL: dropped ${name}`);
    });
    const url = new URL(PG_URL);
    url.pathname = `/${name}`;
    databases.push({
      DATABASE_URL: url.toString(),
      SECRET_KEY: secret,
      DATA_DIR: join(root, suffix),
    });
  }
  if (HTTP_ROWS) {
    const [smallDb, largeDb, writesDb] = databases;
    log(
      `PostgreSQL: seeding ${fmtInt(SMALL_TRIPS)} and ${fmtInt(LARGE_TRIPS)} trips in ${base}_{small,large}`,
    );
    const small = await seedTenant(smallDb, SMALL_TRIPS);
    const large = await seedTenant(largeDb, LARGE_TRIPS);
    log(`PostgreSQL: seeded in ${seconds(small.seedMs)} and ${seconds(large.seedMs)}`);
    const writer = await seedTenant(writesDb, 10);
    await benchBackend('PostgreSQL', small, large, smallDb, largeDb, {
      tenant: writer,
      db: writesDb,
    });
  }
  const named = (suffix: string) => databases[suffixes.indexOf(suffix)];
  if (CONTENTION_ROWS) await contentionRows('PostgreSQL', named('contention'));
  if (DELIVERY_ROWS) await deliveryRows('PostgreSQL', named('deliveries'));
  if (RETENTION_ROWS) await retentionRows('PostgreSQL', named('retention'));
  if (ERASURE_ROWS) await erasureRows('PostgreSQL', named('erasure'));
  if (SCALE_ROWS) {
    await waitForQuiet(10_000);
    log(`PostgreSQL: deliveries at scale: ${fmtInt(SCALE_HISTORY)} delivered rows`);
    scaleResults.push(
      await benchDeliveryScale({
        backend: 'PostgreSQL',
        dbEnv: named('scale'),
        history: SCALE_HISTORY,
        deliveries: SCALE_DELIVERIES,
        logLevel: LOG_LEVEL,
        log,
        track,
      }),
    );
  }
  if (CAPACITY_ROWS) {
    await waitForQuiet(10_000);
    log(`PostgreSQL: capacity of one server (a cluster of the benchmark's own)`);
    capacityResults.push(
      await benchCapacity({
        deliveries: CAPACITY_DELIVERIES,
        history: CAPACITY_HISTORY,
        logLevel: LOG_LEVEL,
        log,
        track,
      }),
    );
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// Output.

function fmtInt(n: number): string {
  return Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '–';
}
function fmtMs(n: number): string {
  return Number.isFinite(n) ? n.toFixed(2) : '–';
}
function fmtPct(n: number | null): string {
  return n === null || !Number.isFinite(n) ? '–' : n.toFixed(0);
}
function fmtSec(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
}

function verdict(row: Row): string {
  const involved = [row.m, row.ref].filter((m): m is Measurement => m !== undefined);
  const invalid = involved.filter((m) => !isValid(m));
  if (invalid.length > 0) {
    return `invalid run (${invalid.map((m) => `${m.non2xx} non-2xx, ${m.errors} errors, ${m.timeouts} timeouts`).join('; ')})`;
  }
  const disturbedMark = involved.some(isDisturbed) ? ' ⚠ disturbed' : '';
  if (row.informational) return `–${disturbedMark}`;
  const misses: string[] = [];
  if (row.ref && row.ratioTarget !== undefined && row.m.rps / row.ref.rps < row.ratioTarget) {
    misses.push('ratio');
  }
  if (row.p99TargetMs !== undefined && !(row.m.p99 < row.p99TargetMs)) misses.push('p99');
  return metOrMisses(misses) + disturbedMark;
}

function cpuModel(): string {
  const list = cpus();
  return list.length > 0 ? `${list[0].model.trim()} × ${list.length}` : 'unknown CPU';
}

function httpReport(notes: string[]): string[] {
  const autocannonVersion = (
    JSON.parse(
      readFileSync(join(REPO_ROOT, 'node_modules', 'autocannon', 'package.json'), 'utf8'),
    ) as { version: string }
  ).version;
  const out: string[] = [
    '',
    '### Benchmark',
    '',
    `${new Date().toISOString().slice(0, 10)} · ${cpuModel()} · ${platform()} ${release()} · Node ${process.version} · ` +
      `autocannon ${autocannonVersion}, ${CONNECTIONS} connections, pipelining 1, 127.0.0.1 only; ` +
      `${fmtSec(DURATION)} s measured per row in ${ROUNDS} window(s) interleaved with the other rows of the backend, ` +
      `each after a warm-up on the same connections (${WARMUP} s, then ${ROUND_WARMUP} s). ` +
      'Every server is its own child process; autocannon runs in the parent. ' +
      `The API is \`src/main.ts\` (what \`npm start\` runs, here through tsx) with LOG_LEVEL=${LOG_LEVEL}` +
      `${LOG_LEVEL === 'info' ? '' : ' (the default, info, writes one JSON log line per request)'} and stdout to /dev/null.`,
    '',
    '| scenario | backend | req/s | p50 ms | p99 ms | p99.9 ms | reference req/s | ratio | target | met |',
    '|---|---|---:|---:|---:|---:|---:|---:|---|---|',
  ];
  for (const row of rows) {
    const ratio = row.ref ? (row.m.rps / row.ref.rps).toFixed(2) : '–';
    out.push(
      `| ${row.scenario} | ${row.backend} | ${fmtInt(row.m.rps)} | ${fmtMs(row.m.p50)} | ${fmtMs(row.m.p99)} | ${fmtMs(row.m.p999)} | ` +
        `${row.ref ? fmtInt(row.ref.rps) : '–'} | ${ratio} | ${row.targetText} | ${verdict(row)} |`,
    );
  }
  for (const note of notes) out.push('', `> ${note}`);
  const disturbed = measurements.filter(isDisturbed);
  if (disturbed.length > 0) {
    out.push(
      '',
      `> ⚠ Other processes took more than ${DISTURBED_PCT}% of a core during ${disturbed.length} measurement(s) ` +
        `(${disturbed.map((m) => `${m.label}, ${m.backend}`).join('; ')}; see "other CPU %"): those numbers ` +
        'are depressed and the rows marked "disturbed" are not comparable. Re-run on a quiet machine.',
    );
  }
  out.push(
    '',
    'ratio = req/s ÷ reference req/s. References: a bare Fastify route answering a constant JSON object (SQLite row); ' +
      "a bare Fastify route doing `select * from trips where id = $1` through a `pg.Pool` of 10, like the API's pool " +
      '(PostgreSQL row); the same list page on a tenant with 100× fewer trips, in its own database (list rows; ' +
      '"cost ≤ 1.2×" means req/s at least 1/1.2 of it). List pages start in the middle of the tenant\'s list ' +
      '(keyset cursor at position n/2). The idempotency row compares the same client creation with a fresh ' +
      '`Idempotency-Key` per request against none (every request inserts a client; no target, so "met" shows –). ' +
      'Latency percentiles are exact, over every 2xx response of the measured windows.',
    '',
    '<details><summary>Every measurement</summary>',
    '',
    '| measurement | backend | req/s | req/s per window | p50 ms | p90 ms | p99 ms | max ms | server CPU % | server CPU µs/req | PostgreSQL CPU % | autocannon CPU % | other CPU % | machine CPU % before | bytes/resp | non-2xx / errors |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  );
  for (const m of measurements) {
    out.push(
      `| ${m.label} | ${m.backend} | ${fmtInt(m.rps)} | ${m.windowRps.map(fmtInt).join(' / ')} | ` +
        `${fmtMs(m.p50)} | ${fmtMs(m.p90)} | ${fmtMs(m.p99)} | ${fmtMs(m.max)} | ` +
        `${fmtPct(m.serverCpuPct)} | ${fmtInt(m.serverCpuUsPerRequest ?? Number.NaN)} | ${fmtPct(m.dbCpuPct)} | ` +
        `${fmtPct(m.clientCpuPct)} | ${fmtPct(m.otherCpuPct)} | ${fmtPct(m.backgroundCpuPct)} | ` +
        `${fmtInt(m.bytesPerResponse)} | ${m.non2xx} / ${m.errors + m.timeouts} |`,
    );
  }
  out.push(
    '',
    'CPU % is of one core: the server process; all `postgres` processes on the machine; the load generator ' +
      "(autocannon in this process; the open-loop rows' generator in a child process): near 100 means it, not the " +
      'server, set the pace; "other" is the rest of the machine during the ' +
      'measured windows (kernel network work, and any other process); "machine CPU % before" is the most the machine ' +
      `used just before a window, every bench server idle. ${cpus().length} cores are shared by all of them. ` +
      "During an open-loop row's window the run's other servers are paused (SIGSTOP): its tail is the API's, " +
      "its database's and the generator's.",
    '',
    '</details>',
    '',
  );
  if (profiles.length > 0) {
    out.push(
      '### CPU profiles (last window of each row)',
      '',
      ...profiles.flatMap((p) => [p, '']),
      "> Profiled run: the numbers above include the profiler's overhead.",
      '',
    );
  }
  return out;
}

function contentionReport(): string[] {
  if (contentionResults.length === 0) return [];
  const out = [
    '',
    '### Contention',
    '',
    `One API process with its worker (\`src/main.ts\`). Creates: ${CONTENTION_CONNECTIONS} connections of one tenant, windows of ` +
      "keyed and unkeyed creates interleaved; every answer must be 201. Mixed: tenant A's single-trip reads " +
      'beside tenants A and B each creating clients with fresh keys, every create an event the worker delivers ' +
      'to a receiver on 127.0.0.1; all three at fixed rates (open loop, latency from the scheduled time).',
    '',
    '| scenario | backend | req/s | p50 ms | p99 ms | reference req/s | ratio | target | met |',
    '|---|---|---:|---:|---:|---:|---:|---|---|',
  ];
  for (const r of contentionResults) {
    const ratio = r.keyed.rps / r.plain.rps;
    const errors = [r.keyed, r.plain].reduce((n, m) => n + m.non2xx + m.errors + m.timeouts, 0);
    const misses = [
      ...(ratio >= CONTENTION_TARGET ? [] : ['ratio']),
      ...(errors === 0 ? [] : ['errors']),
    ];
    out.push(
      `| Keyed \`POST /api/v1/trips\`, ${CONTENTION_CONNECTIONS} connections, one tenant, vs unkeyed | ${r.backend} | ` +
        `${fmtInt(r.keyed.rps)} | ${fmtMs(r.keyed.p50)} | ${fmtMs(r.keyed.p99)} | ${fmtInt(r.plain.rps)} | ` +
        `${ratio.toFixed(2)} | ratio ≥ ${CONTENTION_TARGET}, 0 errors (${errors}) | ${metOrMisses(misses)} |`,
    );
    const writes = r.writers.map((m) => `${fmtInt(m.rps)}/s, p99 ${fmtMs(m.p99)} ms`).join(' and ');
    const writeErrors = [r.reads, ...r.writers].reduce(
      (n, m) => n + m.non2xx + m.errors + m.timeouts,
      0,
    );
    out.push(
      `| Mixed: reads at ${MIXED_READ_RATE}/s beside keyed creates of two tenants at ${MIXED_WRITE_RATE}/s each (${writes}) and the worker (${fmtInt(r.delivered)} deliveries) | ` +
        `${r.backend} | ${fmtInt(r.reads.rps)} | ${fmtMs(r.reads.p50)} | ${fmtMs(r.reads.p99)} | – | – | ` +
        `the reads' p99, 0 errors (${writeErrors}) | ${metOrMisses(writeErrors === 0 ? [] : ['errors'])} |`,
    );
  }
  return out;
}

function backlogMet(r: DeliveryResult): string {
  const misses = [
    ...(r.plain.perSec / r.ceiling.perSec >= BACKLOG_CEILING_TARGET ? [] : ['ratio']),
    ...(r.plain.cpuUsPerDelivery !== null && r.plain.cpuUsPerDelivery <= BACKLOG_CPU_TARGET_US
      ? []
      : ['CPU']),
  ];
  return metOrMisses(misses);
}

/** A row's verdict from the targets it missed. */
function metOrMisses(misses: string[]): string {
  return misses.length === 0 ? '✅ yes' : `❌ no (${misses.join(', ')})`;
}

function deliveryReport(): string[] {
  if (deliveryResults.length === 0) return [];
  const out = [
    '',
    '### Webhook deliveries',
    '',
    `One API process with its worker (\`node --import tsx src/main.ts\`, default worker settings: 256 attempts in flight, ` +
      "each subscription's adaptive limit (4 to 16), claims and outcomes in batches of 200) delivering to an HTTPS receiver in the benchmark " +
      'process (its own CA, answers 200 at once). Throughput: a backlog of ' +
      `${fmtInt(DELIVERY_EVENTS)} \`client.created\` events for 4 subscriptions (${fmtInt(DELIVERY_EVENTS * 4)} deliveries), ` +
      'written through the events service while no worker runs, then worked off; deliveries/s at the receiver between ' +
      `the 5th and 95th percentile arrival, median of ${ROUNDS} run(s), interleaved. Ceiling: the same number of bare ` +
      'undici `request()` POSTs of the same size from a child process, 256 at once, to the same receiver. Latency: ' +
      'clients created through the admin API at 20 a second (80 deliveries a second), from sending the request to the ' +
      "delivery's first byte at the receiver.",
    '',
    '| scenario | backend | deliveries/s (runs) | ceiling POSTs/s | ratio | p50 ms | p99 ms | API CPU µs/delivery | target | met |',
    '|---|---|---:|---:|---:|---:|---:|---:|---|---|',
  ];
  const mark = (ok: boolean) => (ok ? '✅ yes' : '❌ no');
  for (const r of deliveryResults) {
    const runs = (values: number[]) => values.map(fmtInt).join(' / ');
    const cpu = (value: number | null) => (value === null ? '–' : fmtInt(value));
    out.push(
      `| Backlog worked off, 4 subscriptions | ${r.backend} | ${fmtInt(r.plain.perSec)} (${runs(r.plain.runs)}) | ` +
        `${fmtInt(r.ceiling.perSec)} (${runs(r.ceiling.runs)}) | ${(r.plain.perSec / r.ceiling.perSec).toFixed(2)} | – | – | ` +
        `${cpu(r.plain.cpuUsPerDelivery)} (bare POST ${cpu(r.ceiling.cpuUsPerDelivery)}) | ratio ≥ ${BACKLOG_CEILING_TARGET.toFixed(2)}, ≤ ${BACKLOG_CPU_TARGET_US} µs CPU/delivery | ` +
        `${backlogMet(r)} |`,
      `| The same with a 5th endpoint timing out every attempt (${fmtSec(r.timeoutMs / 1000)} s): the 4 others' rate | ${r.backend} | ` +
        `${fmtInt(r.withTimeouts.perSec)} (${runs(r.withTimeouts.runs)}) | ref ${fmtInt(r.plain.perSec)} | ` +
        `${(r.withTimeouts.perSec / r.plain.perSec).toFixed(2)} | – | – | ${cpu(r.withTimeouts.cpuUsPerDelivery)} | ` +
        `ratio ≥ 0.90 | ${mark(r.withTimeouts.perSec / r.plain.perSec >= 0.9)} |`,
      `| The same backlog run by \`tourops serve --processes auto\` (${CORES} processes) vs one process | ${r.backend} | ` +
        `${fmtInt(r.processes.perSec)} (${runs(r.processes.runs)}) | ref ${fmtInt(r.plain.perSec)} | ` +
        `${(r.processes.perSec / r.plain.perSec).toFixed(2)} | – | – | ${cpu(r.processes.cpuUsPerDelivery)} | ` +
        'informational (scaling; the receiver and PostgreSQL share the cores) | – |',
      `| The same backlog run, each delivery also signed for Standard Webhooks: HMAC \`v1\` and Ed25519 \`v1a\` | ${r.backend} | ` +
        `${fmtInt(r.ed25519.perSec)} (${runs(r.ed25519.runs)}) | ref ${fmtInt(r.plain.perSec)} | ` +
        `${(r.ed25519.perSec / r.plain.perSec).toFixed(2)} | – | – | ${cpu(r.ed25519.cpuUsPerDelivery)} (HMAC only ${cpu(r.plain.cpuUsPerDelivery)}) | ` +
        'informational (the cost of asymmetric signatures) | – |',
      `| The same backlog run into RabbitMQ: publisher-confirmed publishes to a queue per subscription | ${r.backend} | ` +
        `${fmtInt(r.rabbitmq.perSec)} (${runs(r.rabbitmq.runs)}) | ref ${fmtInt(r.plain.perSec)} | ` +
        `${(r.rabbitmq.perSec / r.plain.perSec).toFixed(2)} | – | – | ${cpu(r.rabbitmq.cpuUsPerDelivery)} (HTTPS ${cpu(r.plain.cpuUsPerDelivery)}) | ` +
        'informational (a broker destination against the HTTPS backlog run) | – |',
      `| The same backlog run into NATS JetStream: acknowledged publishes to a stream per subscription | ${r.backend} | ` +
        `${fmtInt(r.nats.perSec)} (${runs(r.nats.runs)}) | ref ${fmtInt(r.plain.perSec)} | ` +
        `${(r.nats.perSec / r.plain.perSec).toFixed(2)} | – | – | ${cpu(r.nats.cpuUsPerDelivery)} (HTTPS ${cpu(r.plain.cpuUsPerDelivery)}) | ` +
        'informational (a broker destination against the HTTPS backlog run) | – |',
      `| The same backlog run, each delivery through a trivial transformation (one header added) | ${r.backend} | ` +
        `${fmtInt(r.transformed.perSec)} (${runs(r.transformed.runs)}) | ref ${fmtInt(r.plain.perSec)} | ` +
        `${(r.transformed.perSec / r.plain.perSec).toFixed(2)} | – | – | ${cpu(r.transformed.cpuUsPerDelivery)} (none ${cpu(r.plain.cpuUsPerDelivery)}) | ` +
        'informational (the cost of a transformation a delivery) | – |',
      `| The same backlog run while another tenant's transformation loops to its time cap every run (${fmtInt(r.hostileRuns)} runs failed): the 4 others' rate | ${r.backend} | ` +
        `${fmtInt(r.besideHostile.perSec)} (${runs(r.besideHostile.runs)}) | ref ${fmtInt(r.plain.perSec)} | ` +
        `${(r.besideHostile.perSec / r.plain.perSec).toFixed(2)} | – | – | ${cpu(r.besideHostile.cpuUsPerDelivery)} | ` +
        `ratio ≥ 0.90 | ${mark(r.besideHostile.perSec / r.plain.perSec >= 0.9)} |`,
      `| One endpoint serving ${PUSHBACK_CAPACITY} requests at a time (${PUSHBACK_MS} ms each), 503 to the rest: ` +
        `${fmtInt(r.pushback.deliveries)} deliveries, ${(r.pushback.wasted * 100).toFixed(1)}% of attempts refused | ${r.backend} | ` +
        `${fmtInt(r.pushback.perSec)} | ideal ${fmtInt(r.pushback.ideal)} | ${(r.pushback.perSec / r.pushback.ideal).toFixed(2)} | – | – | – | ` +
        `refused < 20% | ${mark(r.pushback.wasted < 0.2)} |`,
      `| Event commit to first byte at the receiver, ${r.latency.perSec} deliveries/s | ${r.backend} | – | – | – | ` +
        `${fmtMs(r.latency.p50)} | ${fmtMs(r.latency.p99)} | – | p50 < 50 ms | ${mark(r.latency.p50 < 50)} |`,
    );
  }
  for (const f of fanOutResults) {
    // Costs, as rates: deliveries written a second.
    const rate = (m: FanOutResult['without']) => (1e6 / m.usPerEvent) * f.subscriptions;
    const ratio = f.withFilters.usPerEvent / f.without.usPerEvent;
    out.push(
      `| Fan-out of one event to ${f.subscriptions} subscriptions (one transaction each), every subscription with a ` +
        `5-condition payload filter that takes it, vs none: ${fmtInt(f.withFilters.usPerEvent)} vs ` +
        `${fmtInt(f.without.usPerEvent)} µs an event | ${f.backend} | ${fmtInt(rate(f.withFilters))} | ` +
        `ref ${fmtInt(rate(f.without))} | ${(1 / ratio).toFixed(2)} | – | – | ` +
        `${fmtInt(f.withFilters.cpuUsPerEvent / f.subscriptions)} (none ${fmtInt(f.without.cpuUsPerEvent / f.subscriptions)}) | ` +
        `cost ≤ 1.2× without | ${mark(ratio <= 1.2)} |`,
    );
  }
  for (const e of changeEmitResults) {
    out.push(
      `| A client archived or unarchived with its \`client.updated\` event to ${e.subscriptions} subscriptions (one ` +
        `transaction each): ${fmtInt(e.cpuUsPerChange)} µs CPU a change, of which ${e.cpuUsObjectAndChanges.toFixed(1)} µs ` +
        `make \`object\` and \`changes\` (${((100 * e.cpuUsObjectAndChanges) / e.cpuUsPerChange).toFixed(1)}%); ` +
        `\`data\` ${fmtInt(e.dataBytes)} bytes, ${fmtInt(e.membersBytes)} without them | ${e.backend} | – | – | – | – | – | ` +
        `${fmtInt(e.cpuUsPerChange)} | informational | – |`,
    );
  }
  for (const c of crashResults) {
    out.push(
      `| A worker killed (SIGKILL) mid-backlog and restarted at once: its ${c.inFlightAtKill} attempts in flight ` +
        `arrived again within ${fmtSec(c.worstResendMs / 1000)} s of the kill, all ${fmtInt(c.events)} events within ` +
        `${fmtSec(c.allDeliveredMs / 1000)} s, ${c.lost} lost | ${c.backend} | – | – | – | – | – | – | ` +
        `in flight again ≤ 15 s, none lost | ${mark(c.worstResendMs <= 15_000 && c.lost === 0)} |`,
    );
  }
  out.push(
    '',
    'ratio: the backlog run against the ceiling (first row), the backlog run with a timing-out endpoint against the backlog run ' +
      'without (second row), the fan-out without filters against with (a cost ratio of 1.2 is 0.83); the fan-out row ' +
      `emits ${fmtInt(FAN_OUT_EVENTS)} events a run through the events service in the benchmark process, its CPU column that process's per delivery row written. ` +
      "API CPU: the process's CPU time from its health check answering to the last delivery, per delivery in that span; " +
      "bare POST: the ceiling sender's CPU per POST, the floor of a delivery on this stack " +
      '(the receiver, the ceiling sender and PostgreSQL run in other processes on the same 2 cores). Latency samples: ' +
      deliveryResults
        .map(
          (r) =>
            `${r.backend} ${r.latency.samples} (p90 ${fmtMs(r.latency.p90)}, max ${fmtMs(r.latency.max)} ms)`,
        )
        .join(', ') +
      '.',
    '',
  );
  return out;
}

function retentionReport(): string[] {
  if (retentionResults.length === 0) return [];
  const out = [
    '',
    '### Retention purge under load',
    '',
    `One API process with its worker (\`src/main.ts\`), a 1,000-trip tenant and ${fmtInt(RETENTION_PURGED)} deliveries ` +
      `past RETENTION_DAYS (${fmtInt(RETENTION_PURGED / 4)} events, ${fmtInt(RETENTION_PURGED / 4)} attempts, and 1,000 events ` +
      `no one subscribed to). The authenticated single read at ${CONNECTIONS} connections (closed loop): ` +
      `${fmtSec(DURATION)} s before and ${fmtSec(DURATION)} s after the purge ("without"), and for as long as the ` +
      'worker\'s purge runs ("during": started over IPC as the measured part opens, default batch and pacing).',
    '',
    '| scenario | backend | rows deleted | purge s | req/s without | req/s during | p99 ms without | p99 ms during | p99 ratio | target | met |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|',
  ];
  for (const r of retentionResults) {
    const deleted = r.purge.deliveries + r.purge.events + r.purge.notifications;
    out.push(
      `| \`GET /api/v1/trips/{id}\` during a retention purge vs without | ${r.backend} | ${fmtInt(deleted)} | ` +
        `${(r.purge.ms / 1000).toFixed(1)} | ${besideJobColumns(r, RETENTION_P99_FACTOR)} |`,
    );
  }
  out.push(
    '',
    'Rows deleted: deliveries (their attempts went with them by cascade, not counted) and events. ' +
      besideJobCpu(retentionResults, 'the purge'),
    '',
  );
  return out;
}

/** What the report shows of a row measured beside a worker's job. */
type BesideJobRow = { backend: string } & Omit<BesideJobResult<unknown>, 'job'>;

/** A row beside a worker's job: its rates, p99s, ratio, target and whether it met it. */
function besideJobColumns(r: BesideJobRow, factor: number) {
  const ratio = r.during.p99 / r.without.p99;
  const valid = isValid(r.without) && isValid(r.during);
  const met = !valid
    ? 'invalid run'
    : (ratio <= factor ? '✅ yes' : '❌ no') +
      ([r.without, r.during].some(isDisturbed) ? ' ⚠ disturbed' : '');
  return (
    `${fmtInt(r.without.rps)} | ${fmtInt(r.during.rps)} | ${fmtMs(r.without.p99)} | ` +
    `${fmtMs(r.during.p99)} | ${ratio.toFixed(2)} | p99 ≤ ${factor}× without | ${met}`
  );
}

/** The server's CPU a read without and during a worker's job, by backend. */
function besideJobCpu(results: BesideJobRow[], job: string) {
  return (
    'Server CPU per read without / during: ' +
    results
      .map(
        (r) =>
          `${r.backend} ${fmtInt(r.without.serverCpuUsPerRequest ?? Number.NaN)} / ${fmtInt(r.during.serverCpuUsPerRequest ?? Number.NaN)} µs`,
      )
      .join(', ') +
    ` (during includes ${job}'s own work on SQLite, where it shares the process).`
  );
}

function startupReport(): string[] {
  if (startupResults.length === 0) return [];
  return [
    '',
    '### Start-up',
    '',
    'From spawn to the end of the work, a new process on a new SQLite data directory each time, median of ' +
      `${STARTUP_RUNS}, alternating: \`node bin/tourops.js\` (the compiled sources, bin/compiled.js; its build ` +
      'after a change is not counted) against `node --import tsx bench/sources-cli.ts` (the same entry points ' +
      'through tsx).',
    '',
    '| scenario | compiled ms | through tsx ms | ratio |',
    '|---|---:|---:|---:|',
    ...startupResults.map(
      (r) =>
        `| ${r.scenario} | ${fmtInt(r.compiledMs)} | ${fmtInt(r.tsxMs)} | ${(r.compiledMs / r.tsxMs).toFixed(2)} |`,
    ),
    '',
  ];
}

/** Claims at 1M rows: p99 within this many times the p99 on an empty history. */
const CLAIM_GROWTH_TARGET = 2;

function scaleReport(): string[] {
  if (scaleResults.length === 0) return [];
  const out = [
    '',
    '### Deliveries at scale (PostgreSQL)',
    '',
    `Claims: ${CLAIM_BACKLOG_TEXT} claimed 200 at a time (16 a subscription, as the worker claims) by ` +
      '`DeliveriesService.claim` in the benchmark process, as delivered history grows (rows written by the ' +
      'database, then ANALYZE and a CHECKPOINT). Backlog run: the API with its worker and two `tourops worker` processes on the ' +
      'largest history, to an HTTPS receiver in the benchmark process (answers 200 at once); deliveries/s ' +
      'between the 5th and 95th percentile arrival. RETENTION_DAYS=0.',
    '',
    '| scenario | delivered rows | claims | p50 ms | p99 ms | max ms | target | met |',
    '|---|---:|---:|---:|---:|---:|---|---|',
  ];
  for (const r of scaleResults) {
    const [empty] = r.claims;
    for (const c of r.claims) {
      const last = c === r.claims.at(-1);
      const met = c.p99 <= CLAIM_GROWTH_TARGET * empty.p99 ? '✅ yes' : '❌ no';
      out.push(
        `| Claim of 200 due deliveries, 20 subscriptions | ${fmtInt(c.historyRows)} | ${c.samples} | ` +
          `${fmtMs(c.p50)} | ${fmtMs(c.p99)} | ${fmtMs(c.max)} | ` +
          `${last ? `p99 ≤ ${CLAIM_GROWTH_TARGET}× the first row's (index-bound)` : '–'} | ${last ? met : '–'} |`,
      );
    }
    out.push(
      '',
      `| scenario | deliveries | processes | deliveries/s |`,
      '|---|---:|---:|---:|',
      `| Backlog worked off by the API and two workers on ${fmtInt(r.claims.at(-1)?.historyRows ?? 0)} delivered rows | ` +
        `${fmtInt(r.backlog.deliveries)} | ${r.backlog.processes} | ${fmtInt(r.backlog.perSec)} |`,
      '',
    );
  }
  return out;
}
function capacityReport(): string[] {
  const [r] = capacityResults;
  if (!r) return [];
  const cost = (c: {
    statements: number;
    transactions: number;
    rowsWritten: number;
    walBytes: number;
    cpuUs: number;
  }) =>
    `${c.statements.toFixed(2)} | ${c.transactions.toFixed(3)} | ${c.rowsWritten.toFixed(2)} | ` +
    `${fmtInt(c.walBytes)} | ${fmtInt(c.cpuUs)}`;
  const out = [
    '',
    '### Capacity of one PostgreSQL',
    '',
    "A PostgreSQL 15 cluster of the benchmark's own (fsync on, defaults otherwise, pg_stat_statements), " +
      `${r.subscriptions} subscriptions to an HTTPS receiver in the benchmark process (200 at once). ` +
      'Emit: clients created one transaction each through the service (row, event, a delivery per ' +
      'subscription). Backlog run: a backlog sent by N `tourops worker` processes; deliveries/s between the 5th ' +
      'and 95th percentile arrival; cores busy over the backlog run. Per delivery: statements ' +
      '(pg_stat_statements), transactions and rows inserted, updated or deleted (pg_stat_database), WAL ' +
      "bytes (pg_current_wal_lsn()), the server's CPU.",
    '',
    '| what | workers | deliveries/s | statements | transactions | rows written | WAL bytes | PG CPU µs | cores: PG / workers / receiver / machine |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---|',
    `| Emit (a delivery's share of its event) | – | – | ${cost(r.emit)} | – |`,
  ];
  for (const d of r.backlogRuns) {
    out.push(
      `| Backlog run | ${d.workers} | ${fmtInt(d.perSec)} | ${cost(d)} | ` +
        `${d.cores.database.toFixed(2)} / ${d.cores.workers.toFixed(2)} / ${d.cores.receiver.toFixed(2)} / ${d.cores.machine.toFixed(2)} |`,
    );
  }
  const last = r.backlogRuns.at(-1);
  if (last) {
    out.push(
      '',
      `Statements of the backlog run with ${last.workers} workers, most called first (calls a delivery, share of execution time):`,
      '',
      '| statement | calls | time |',
      '|---|---:|---:|',
      ...last.top.map(
        (t) =>
          `| \`${t.query.replaceAll('|', '\\|')}\` | ${t.calls.toFixed(3)} | ${(t.timeShare * 100).toFixed(0)}% |`,
      ),
    );
  }
  out.push(
    '',
    '| scenario | delivered rows | claims | p50 ms | p99 ms | max ms |',
    '|---|---:|---:|---:|---:|---:|',
    `| Claim of 200 due deliveries, 20 subscriptions | ${fmtInt(r.claim.historyRows)} | ${r.claim.samples} | ` +
      `${fmtMs(r.claim.p50)} | ${fmtMs(r.claim.p99)} | ${fmtMs(r.claim.max)} |`,
    '',
  );
  return out;
}

function erasureReport(): string[] {
  if (erasureResults.length === 0) return [];
  const out = [
    '',
    "### Erasure under another tenant's load",
    '',
    `One API process with its worker (\`src/main.ts\`) and two tenants: the reader's (1,000 trips) and one whose ` +
      `${fmtInt(ERASURE_EVENTS)} client events over ten days are a quarter about the client erased, each of those ` +
      "delivered once with an attempt log that echoes its e-mail. The reader's authenticated single read at " +
      `${CONNECTIONS} connections (closed loop): ${fmtSec(DURATION)} s before and ${fmtSec(DURATION)} s after ` +
      '("without"), and from `POST /api/v1/erasures` until its record says done ("during": the worker\'s first ' +
      'look for it, on its timer, is inside).',
    '',
    '| scenario | backend | events read | redacted (events, attempts) | erasure s | req/s without | req/s during | p99 ms without | p99 ms during | p99 ratio | target | met |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|',
  ];
  for (const r of erasureResults) {
    out.push(
      `| \`GET /api/v1/trips/{id}\` during another tenant's erasure vs without | ${r.backend} | ` +
        `${fmtInt(r.events)} | ${fmtInt(r.redacted.events)}, ${fmtInt(r.redacted.webhookAttempts)} | ` +
        `${(r.erasureMs / 1000).toFixed(1)} | ${besideJobColumns(r, ERASURE_P99_FACTOR)} |`,
    );
  }
  out.push('', besideJobCpu(erasureResults, 'the erasure'), '');
  return out;
}

const CLAIM_BACKLOG_TEXT =
  'a backlog of 30,000 pending deliveries (1,500 events × 20 subscriptions)';

function printReport(notes: string[], startedAt: number): void {
  const deliveryProfiles = deliveryResults.flatMap((r) => (r.profile ? [r.profile, ''] : []));
  const out = [
    ...(HTTP_ROWS ? httpReport(notes) : ['', ...notes.map((note) => `> ${note}`)]),
    ...contentionReport(),
    ...deliveryReport(),
    ...retentionReport(),
    ...erasureReport(),
    ...startupReport(),
    ...scaleReport(),
    ...capacityReport(),
    ...deliveryProfiles,
    `Total bench time: ${seconds(performance.now() - startedAt)}.`,
    '',
  ];
  process.stdout.write(out.join('\n'));
}

// ---------------------------------------------------------------------------------------------

/** Runs everything; returns false when a backend failed (its rows are missing from the report). */
async function main(): Promise<boolean> {
  const startedAt = performance.now();
  log(
    `${CONNECTIONS} connections, ${fmtSec(DURATION)} s measured per row in ${ROUNDS} round(s), ` +
      `LOG_LEVEL=${LOG_LEVEL}, backend ${BACKEND}, hard limit ${budgetSec} s`,
  );
  const notes: string[] = [];
  let ok = true;
  // A failing backend (say, the API does not start) must not hide the other one's results.
  const attempt = async (name: string, body: () => Promise<string | null>) => {
    try {
      const note = await body();
      if (note) {
        log(note);
        notes.push(note);
      }
    } catch (error) {
      ok = false;
      const message = (error as Error).message.split('\n').slice(0, 6).join(' / ');
      process.stderr.write(
        `\n[bench] ${name} failed: ${(error as Error).stack ?? String(error)}\n\n`,
      );
      notes.push(`${name} rows missing: the run failed (${message}).`);
      await stopServers();
    }
  };
  await waitForQuiet(15_000);
  if (BACKEND !== 'postgres') await attempt('SQLite', benchSqlite);
  if (BACKEND !== 'sqlite') await attempt('PostgreSQL', benchPostgres);
  printReport(notes, startedAt);
  return ok;
}

try {
  const ok = await main();
  await cleanup();
  process.exit(ok ? 0 : 1);
} catch (error) {
  process.stderr.write(`\nbench failed: ${(error as Error).stack ?? String(error)}\n`);
  await cleanup();
  process.exit(1);
}
