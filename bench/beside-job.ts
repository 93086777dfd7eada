/**
 * What the retention and erasure rows share: one API process (`src/main.ts`, what `npm start`
 * runs, so on SQLite the worker's job shares the API's thread, as it does in production) and a
 * tenant's authenticated single read in three windows of the same closed-loop load: without the
 * job (before), during it (the measured part opens as the job is started and closes as it ends),
 * without (after); the two "without" windows are combined.
 */
import { sql } from 'kysely';
import type { Database } from '../src/db/database.ts';
import { combine, type Measurement, runWindow, type Window } from './measure.ts';
import { type ServerProcess, startServer } from './processes.ts';
import type { SeededTenant } from './seed.ts';

export interface BesideJobOptions {
  backend: string;
  /** The database's environment (DATA_DIR, or DATABASE_URL and SECRET_KEY). */
  dbEnv: Record<string, string>;
  /** The API's environment besides the database (log level, rate limits). */
  apiEnv: Record<string, string>;
  connections: number;
  warmupSec: number;
  /** Measured seconds of each window without the job. */
  durationSec: number;
  dbProcessName?: string;
  log: (message: string) => void;
  track: (server: ServerProcess, live: boolean) => void;
}

export interface BackgroundJob<T> {
  /** The row's name: in the server's name and at the head of its log lines. */
  row: string;
  /** The job in the log lines and the measurements' labels ("a purge"). */
  what: string;
  /** The API's environment besides the row's options. */
  env?: Record<string, string>;
  /** The tenant whose single read is measured. */
  reader: SeededTenant;
  /** The during window's bound: far past what the job takes on either backend. */
  limitSec: number;
  /** Starts the job on the server and resolves when it is done, with its report. */
  run: (server: ServerProcess, limitMs: number) => Promise<T>;
  /** What the log line after the job says of it ("1234 ms"). */
  describe: (result: T) => string;
}

export interface BesideJobResult<T> {
  job: T;
  without: Measurement;
  during: Measurement;
}

export async function readsBesideJob<T>(
  options: BesideJobOptions,
  job: BackgroundJob<T>,
): Promise<BesideJobResult<T>> {
  const { backend, log } = options;
  const server = await startServer({
    name: `api-${backend}-${job.row}`,
    entry: 'src/main.ts',
    env: { ...options.dbEnv, ...options.apiEnv, ...job.env },
  });
  options.track(server, true);
  try {
    const load = (warmupSec: number, durationSec: number) => ({
      url: `${server.baseUrl}/api/v1/trips/${job.reader.tripId}`,
      headers: { authorization: `Bearer ${job.reader.token}` },
      connections: options.connections,
      warmupSec,
      durationSec,
    });
    const hooks = { dbProcessName: options.dbProcessName };
    const head = `${backend}: ${job.row}:`;
    const before = await runWindow(server, load(options.warmupSec, options.durationSec), hooks);
    log(`${head} without ${job.what} ${rate(before)}`);
    let result: { value: T } | null = null;
    const during = await runWindow(
      server,
      {
        ...load(2, job.limitSec),
        until: async () => {
          result = { value: await job.run(server, job.limitSec * 1000) };
        },
      },
      hooks,
    );
    const done = result as { value: T } | null;
    if (done === null) throw new Error(`${head} ${job.what} did not end`);
    log(`${head} during ${job.what} (${job.describe(done.value)}) ${rate(during)}`);
    const after = await runWindow(server, load(2, options.durationSec), hooks);
    log(`${head} without ${job.what}, after it ${rate(after)}`);
    const url = `${server.baseUrl}/api/v1/trips/{id}`;
    return {
      job: done.value,
      without: combine(`single read, without ${job.what}`, backend, url, [before, after]),
      during: combine(`single read during ${job.what}`, backend, url, [during]),
    };
  } finally {
    await server.stop();
    options.track(server, false);
  }
}

/** What autovacuum does to tables that grew (PostgreSQL plans the job from statistics). */
export async function analyze(database: Database): Promise<void> {
  if (database.dialect === 'postgres') await sql`analyze`.execute(database.db);
}

/** Seconds since `since` (a performance.now() reading), for a log line. */
export const secondsSince = (since: number) =>
  `${((performance.now() - since) / 1000).toFixed(1)} s`;

const rate = (w: Window) => `${Math.round(w.requests / w.wallSec)} req/s`;
