import { closeSync, openSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import {
  CompiledQuery,
  type DatabaseConnection,
  Kysely,
  SqliteDialect,
  SqliteDriver,
} from 'kysely';
import pg from 'pg';
import { ConfigError, embeddedDatabaseFile } from '../config.ts';
import { BoundedMap } from '../lib/bounded-map.ts';
import { makePrivateDirectory } from '../lib/private-dir.ts';
import { statementSpan, tracing } from '../lib/tracing.ts';
import { AmbientDialect, type AmbientTransaction } from './ambient.ts';
import { SnakeCaseQueriesPlugin } from './camel-case.ts';
import { OutageBreaker, ProbeConnection } from './outage-breaker.ts';
import { PgDialect, PgStatements } from './pg-driver.ts';
import { RowBuilders, storedParameters } from './row-builder.ts';
import type { DB } from './schema.ts';

export type Dialect = 'sqlite' | 'postgres';

/**
 * A request that has waited 1 s while a probe sent half a second earlier got no answer is
 * evidence enough of an outage: every request answers within 2 s of arrival, even the first
 * ones, and at once after that; the first answered probe ends the outage.
 */
const OUTAGE_BREAKER = {
  probeAfterMs: 500,
  outageAfterMs: 1_000,
  probeTimeoutMs: 500,
  checkEveryMs: 100,
};

/**
 * The one database interface the rest of the code sees. Repositories hold `db`; a statement they
 * run inside `withTransaction` (or an ambient transaction) joins that transaction whatever the
 * repository, so no transaction is passed around and none can be forgotten.
 */
export interface Database {
  readonly db: Kysely<DB>;
  readonly dialect: Dialect;
  /** The pg pool (the PostgreSQL rate-limit store runs its own queries on it); null on SQLite. */
  readonly pool: pg.Pool | null;
  /**
   * Runs `fn` in a transaction that every query it issues joins: committed when `fn` resolves,
   * rolled back when it throws. Inside another one it is a savepoint, so its rollback undoes only
   * its own writes.
   */
  withTransaction<T>(fn: () => Promise<T>): Promise<T>;
  /**
   * Opens a transaction that every query run inside its `run` joins, including `withTransaction`
   * calls (they become savepoints); for work that spans several steps of a request (idempotency).
   */
  beginAmbient(): Promise<AmbientTransaction>;
  /**
   * Whether the calling async context is inside a transaction: nothing but the database's own
   * statements may wait there (tests check that URL resolution never does).
   */
  inTransaction(): boolean;
  /**
   * Copies the embedded database to `file` while it serves (SQLite's online backup: a consistent
   * snapshot, writers keep going). PostgreSQL has pg_dump for that: there it throws ConfigError.
   */
  backup(file: string): Promise<void>;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  /** postgres:// URL; null selects the embedded SQLite database. */
  databaseUrl: string | null;
  /** Directory of the embedded database file (ignored for PostgreSQL). */
  dataDir: string;
  /** Pool size for PostgreSQL. */
  poolSize?: number;
  /**
   * Longest a statement runs (PostgreSQL `statement_timeout`, and the client-side read time-out
   * a frozen server needs, since it cannot even cancel; 0 for none), and SQLite's wait for its
   * write lock.
   */
  statementTimeoutMs?: number;
  /** Longest to wait for a PostgreSQL connection, new or from the pool. */
  connectTimeoutMs?: number;
  /**
   * An idle pooled connection failed (PostgreSQL restarted, or terminated it). The pool drops it
   * and connects anew on demand; without a listener, pg's 'error' event would end the process.
   */
  onIdleConnectionError?: (error: Error) => void;
}

/** A reading statement that returns camelCase row objects built from arrays (see RowBuilders). */
class CamelRowStatement {
  readonly reader = true;
  readonly #statement: BetterSqlite3.Statement;
  readonly #build: (values: unknown[]) => Record<string, unknown>;

  constructor(statement: BetterSqlite3.Statement, rows: RowBuilders) {
    this.#statement = statement.raw(true);
    this.#build = rows.for(statement.columns().map((column) => column.name));
  }

  all(parameters: unknown[]): Record<string, unknown>[] {
    const rows = (
      tracing.on
        ? statementSpan(this.#statement.source, () =>
            this.#statement.all(storedParameters(parameters)),
          )
        : this.#statement.all(storedParameters(parameters))
    ) as unknown[][];
    const out = new Array<Record<string, unknown>>(rows.length);
    for (let i = 0; i < rows.length; i++) out[i] = this.#build(rows[i]);
    return out;
  }

  *iterate(parameters: unknown[]): IterableIterator<Record<string, unknown>> {
    for (const values of this.#statement.iterate(storedParameters(parameters)) as IterableIterator<
      unknown[]
    >) {
      yield this.#build(values);
    }
  }
}

/** A writing statement whose boolean parameters are bound as 0/1. */
class WriteStatement {
  readonly reader = false;
  constructor(readonly statement: BetterSqlite3.Statement) {}

  run(parameters: unknown[]): BetterSqlite3.RunResult {
    if (tracing.on) {
      return statementSpan(this.statement.source, () =>
        this.statement.run(storedParameters(parameters)),
      );
    }
    return this.statement.run(storedParameters(parameters));
  }
}

/**
 * better-sqlite3 compiles a statement on every `prepare`; Kysely prepares per query. Caching by
 * SQL text saves that work on every request (the hot reads are a handful of distinct statements).
 */
class CachingSqlite {
  readonly #db: BetterSqlite3.Database;
  readonly #rows: RowBuilders;
  // Bounded: dynamic IN-lists could otherwise grow the cache without limit.
  readonly #statements = new BoundedMap<string, WriteStatement | CamelRowStatement>(500);

  constructor(db: BetterSqlite3.Database, rows: RowBuilders) {
    this.#db = db;
    this.#rows = rows;
  }

  prepare(sql: string): WriteStatement | CamelRowStatement {
    const statement = this.#statements.get(sql);
    if (statement) return statement;
    const prepared = this.#db.prepare(sql);
    return this.#statements.remember(
      sql,
      prepared.reader ? new CamelRowStatement(prepared, this.#rows) : new WriteStatement(prepared),
    );
  }

  close(): void {
    this.#db.close();
  }
}

/**
 * `BEGIN IMMEDIATE` takes the write lock up front, so two processes sharing the file (the server
 * and the CLI) wait on busy_timeout instead of failing on a read-to-write upgrade.
 */
class ImmediateSqliteDriver extends SqliteDriver {
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }
}

class ImmediateSqliteDialect extends SqliteDialect {
  readonly #config: ConstructorParameters<typeof SqliteDialect>[0];
  constructor(config: ConstructorParameters<typeof SqliteDialect>[0]) {
    super(config);
    this.#config = config;
  }
  override createDriver(): SqliteDriver {
    return new ImmediateSqliteDriver(this.#config);
  }
}

function openSqlite(file: string, busyTimeoutMs = 5_000): BetterSqlite3.Database {
  const sqlite = new BetterSqlite3(file);
  sqlite.pragma(`busy_timeout = ${Math.round(busyTimeoutMs)}`);
  walMode(sqlite, busyTimeoutMs);
  sqlite.pragma('synchronous = NORMAL');
  sqlite.pragma('foreign_keys = ON');
  // Savepoint and statement journals in memory: with this build's default (files in /var/tmp),
  // a keyed write (its handler's transaction is a savepoint) created, wrote and unlinked a temp
  // file in about one request of four. Our statements sort little (keyset pages, LIMITed).
  sqlite.pragma('temp_store = MEMORY');
  return sqlite;
}

/**
 * Puts a new file in WAL mode (a file keeps it). Several processes opening one new file at once
 * (`serve --processes`, a server and the CLI) race for the lock that takes, and SQLite answers
 * SQLITE_BUSY without waiting its busy timeout: so the switch is tried again, within that time.
 */
function walMode(sqlite: BetterSqlite3.Database, busyTimeoutMs: number): void {
  const deadline = Date.now() + busyTimeoutMs;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    try {
      sqlite.pragma('journal_mode = WAL');
      return;
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'SQLITE_BUSY' || Date.now() >= deadline)
        throw error;
      Atomics.wait(pause, 0, 0, 10);
    }
  }
}

/**
 * Checks that DATA_DIR is a directory this process can write (else one line naming it, instead of
 * an SQLite error or a hang on a path such as /proc), creating it private (0700), and creates the
 * database file private (0600) before SQLite opens it: its WAL and SHM files take the same mode.
 */
function prepareDataDir(dataDir: string): string {
  const file = embeddedDatabaseFile(dataDir);
  try {
    makePrivateDirectory(dataDir);
    if (!statSync(dataDir).isDirectory()) {
      throw Object.assign(new Error('not a directory'), { code: 'ENOTDIR' });
    }
    const probe = join(dataDir, `.tourops-probe-${process.pid}`);
    writeFileSync(probe, '', { flag: 'wx', mode: 0o600 });
    unlinkSync(probe);
    closeSync(openSync(file, 'a', 0o600));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unusable';
    throw new ConfigError(`DATA_DIR: "${dataDir}" is not a writable directory (${code})`);
  }
  return file;
}

export function createDatabase(options: DatabaseOptions): Database {
  if (options.databaseUrl) {
    // int8 (counts, sequences) as numbers: every value we store fits in 2^53.
    const types = {
      getTypeParser: (oid: number, format?: string) =>
        oid === 20
          ? (value: string) => Number(value)
          : pg.types.getTypeParser(oid, format as 'text'),
    };
    const statementTimeoutMs = options.statementTimeoutMs ?? 5_000;
    const connectTimeoutMs = options.connectTimeoutMs ?? 2_000;
    const pool = new pg.Pool({
      connectionString: options.databaseUrl,
      max: options.poolSize ?? 10,
      types,
      // A backstop: the driver's own deadline on running time is the connect time-out (pg's is a
      // plain timer, which a stalled process meets before the server's answer; see PgDriver).
      connectionTimeoutMillis: 4 * connectTimeoutMs,
      // Every statement here is short and index-bound; JIT compiling one whose cost estimate
      // passes jit_above_cost (a LIMIT over a large range, say) costs more than it saves (10+ ms).
      options: '-c jit=off',
      // Each statement is written without waiting for the previous one's answer (each still
      // with its own Sync, so a failure ends only its own): transactions send BEGIN, SAVEPOINT
      // and an idempotent answer's COMMIT behind or ahead of a statement, in one round trip.
      pipeline: true,
      // 0: no time-out (migrations). The server cancels at statement_timeout; a frozen or
      // unreachable one cannot, so the client gives up a little later on its own (pg then
      // closes the connection, failing what was pipelined behind the statement too).
      ...(statementTimeoutMs > 0
        ? { statement_timeout: statementTimeoutMs, query_timeout: statementTimeoutMs + 1_000 }
        : {}),
    });
    pool.on('error', (error) => options.onIdleConnectionError?.(error));
    // Serving connections (those with time-outs) fail fast while the server does not answer.
    const statements = new PgStatements();
    const breaker =
      statementTimeoutMs > 0
        ? new OutageBreaker(
            new ProbeConnection(options.databaseUrl, OUTAGE_BREAKER.probeTimeoutMs),
            statements,
            OUTAGE_BREAKER,
          )
        : null;
    const camelCase = new SnakeCaseQueriesPlugin();
    const rows = new RowBuilders((name) => camelCase.toCamelCase(name));
    const dialect = new AmbientDialect(
      new PgDialect(pool, rows, statements, breaker, connectTimeoutMs),
      {
        pipelined: true,
      },
    );
    const db = new Kysely<DB>({ dialect, plugins: [camelCase] });
    return {
      db,
      dialect: 'postgres',
      pool,
      withTransaction: (fn) => dialect.transaction(fn),
      beginAmbient: () => dialect.begin(),
      inTransaction: () => dialect.inTransaction(),
      backup: async () => {
        throw new ConfigError(
          'backup copies the embedded database; with DATABASE_URL use pg_dump (and keep SECRET_KEY)',
        );
      },
      close: () => db.destroy(),
    };
  }
  const file = prepareDataDir(options.dataDir);
  // Never 0 (SQLite would then fail at once on a lock instead of waiting).
  const sqlite = openSqlite(file, options.statementTimeoutMs || 5_000);
  const camelCase = new SnakeCaseQueriesPlugin();
  const rows = new RowBuilders((name) => camelCase.toCamelCase(name));
  const dialect = new AmbientDialect(
    new ImmediateSqliteDialect({
      database: new CachingSqlite(sqlite, rows) as unknown as BetterSqlite3.Database,
    }),
    // A BEGIN IMMEDIATE can fail (the lock held past busy_timeout): nothing may run behind it.
    { pipelined: false },
  );
  const db = new Kysely<DB>({ dialect, plugins: [camelCase] });
  return {
    db,
    dialect: 'sqlite',
    pool: null,
    withTransaction: (fn) => dialect.transaction(fn),
    beginAmbient: () => dialect.begin(),
    inTransaction: () => dialect.inTransaction(),
    backup: async (target) => {
      await sqlite.backup(target);
    },
    close: () => db.destroy(),
  };
}
