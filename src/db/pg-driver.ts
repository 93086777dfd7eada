import {
  CompiledQuery,
  type DatabaseConnection,
  type Driver,
  PostgresDialect,
  type QueryResult,
} from 'kysely';
import type pg from 'pg';
import { runningNow, withDeadline } from '../lib/deadline.ts';
import { DatabaseOutage, type OutageBreaker, type WatchedWaits } from './outage-breaker.ts';
import { statementName } from './prepared.ts';
import { type RowBuilders, storedParameters } from './row-builder.ts';
import { isDatabaseUnavailable } from './unavailable.ts';

/**
 * Kysely's PostgreSQL dialect with a driver of our own, on pg's public API only (`Pool.connect`,
 * `Client.query` with a config object and a callback, `release`): its connections build camelCase
 * row objects from array rows (see RowBuilders), run `prepare`d statements under their names, and
 * tell the outage breaker which statements wait for an answer (see PgStatements).
 */
export class PgDialect extends PostgresDialect {
  constructor(
    private readonly pool: pg.Pool,
    private readonly rows: RowBuilders,
    private readonly statements: PgStatements,
    private readonly breaker: OutageBreaker | null,
    private readonly connectTimeoutMs: number,
  ) {
    super({ pool });
  }

  override createDriver(): Driver {
    return new PgDriver(this.pool, this.rows, this.statements, this.breaker, this.connectTimeoutMs);
  }
}

/**
 * The statements of every connection of a pool that wait for the server's answer: what the
 * outage breaker watches, and what it fails at once when it opens. A query costs a counter and a
 * timestamp here; pg's own `query_timeout` (set on the pool) still ends a connection whose answer
 * never comes, which also frees its socket.
 */
export class PgStatements implements WatchedWaits {
  readonly #connections = new Set<PgConnection>();

  add(connection: PgConnection): void {
    this.#connections.add(connection);
  }

  delete(connection: PgConnection): void {
    this.#connections.delete(connection);
  }

  oldestWaitSince(): number | null {
    let oldest: number | null = null;
    for (const connection of this.#connections) {
      const since = connection.waitingSince();
      if (since !== null && (oldest === null || since < oldest)) oldest = since;
    }
    return oldest;
  }

  cutWaits(): void {
    for (const connection of this.#connections) connection.cut();
  }
}

class PgDriver implements Driver {
  /**
   * One connection per pg client, reused at each checkout. V8's scavenges keep a weak map's
   * young keys: a new wrapper per checkout took the wrapper into the old generation at every
   * query (Kysely's own driver keys its connection objects so).
   */
  private readonly connections = new WeakMap<pg.PoolClient, PgConnection>();

  constructor(
    private readonly pool: pg.Pool,
    private readonly rows: RowBuilders,
    private readonly statements: PgStatements,
    private readonly breaker: OutageBreaker | null,
    private readonly connectTimeoutMs: number,
  ) {}

  async init(): Promise<void> {}

  /**
   * A checkout, new connection or pooled, within connectTimeoutMs of running time (a deadline,
   * src/lib/deadline.ts): a connection whose handshake completed while this process was stalled
   * is not a time-out. One handed out after its deadline goes back to the pool.
   */
  async acquireConnection(): Promise<PgConnection> {
    // An idle connection, none waiting before it, is handed out without a wait to bound (the
    // usual checkout; pg-pool queues it for a tick, so the counts are read before).
    const waits = this.pool.idleCount === 0 || this.pool.waitingCount > 0;
    const checkout = this.breaker ? this.breaker.checkout(this.pool) : this.pool.connect();
    let client: pg.PoolClient;
    try {
      client = waits
        ? await withDeadline(checkout, this.connectTimeoutMs, () => {
            throw new Error('timeout exceeded when trying to connect');
          })
        : await checkout;
    } catch (error) {
      checkout.then(
        (late) => late.release(),
        () => undefined,
      );
      throw error;
    }
    let connection = this.connections.get(client);
    if (!connection) {
      connection = new PgConnection(client, this.rows, this.statements, this.breaker);
      this.connections.set(client, connection);
    }
    connection.broken = false;
    return connection;
  }

  async beginTransaction(connection: PgConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin'));
  }

  async commitTransaction(connection: PgConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('commit'));
  }

  async rollbackTransaction(connection: PgConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('rollback'));
  }

  async releaseConnection(connection: PgConnection): Promise<void> {
    connection.release();
  }

  async destroy(): Promise<void> {
    this.breaker?.close();
    await this.pool.end();
  }
}

/** "cached plan must not change result type": a prepared statement's table changed shape. */
function isStalePlan(error: unknown): boolean {
  return (error as { code?: unknown }).code === '0A000';
}

const WRITES_AFFECTING_ROWS = new Set(['INSERT', 'UPDATE', 'DELETE', 'MERGE']);

type Reject = (error: Error) => void;

class PgConnection implements DatabaseConnection {
  /** The connection timed out or broke: dropped at release, not handed to the next request. */
  broken = false;
  /** Inside BEGIN … COMMIT/ROLLBACK (as sent on this connection). */
  #inTransaction = false;
  /** The statements sent and not answered yet, in the order sent; each fails its caller. */
  readonly #waiting: Reject[] = [];
  /** When the server last answered, or the first waiting statement was sent after a pause. */
  #waitingSince = 0;

  constructor(
    private readonly client: pg.PoolClient,
    private readonly rows: RowBuilders,
    statements: PgStatements,
    private readonly breaker: OutageBreaker | null,
  ) {
    // pg-pool listens for errors on idle clients only: a connection cut while checked out (the
    // server stopped mid-transaction) would otherwise be an uncaught 'error' that ends the
    // process. Listening for the client's whole life also costs nothing per checkout.
    client.on('error', () => {
      this.broken = true;
    });
    statements.add(this);
    client.once('end', () => statements.delete(this));
  }

  executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const { sql, parameters } = query;
    if (sql === 'begin') this.#inTransaction = true;
    else if (sql === 'commit' || sql === 'rollback') this.#inTransaction = false;
    return this.run(sql, storedParameters(parameters), statementName(sql)) as Promise<
      QueryResult<R>
    >;
  }

  // biome-ignore lint/correctness/useYield: streaming is refused, before any row.
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('streaming queries are not supported (pg pipeline mode refuses cursors)');
  }

  release(): void {
    this.#inTransaction = false;
    this.client.release(this.broken ? true : undefined);
  }

  /**
   * The running clock's time (the breaker's) since which the oldest unanswered statement waits,
   * or null.
   */
  waitingSince(): number | null {
    return this.#waiting.length > 0 ? this.#waitingSince : null;
  }

  /**
   * Fails every waiting statement now (the breaker opened; those that follow fail while it is
   * open) and drops the connection at its release.
   */
  cut(): void {
    if (this.#waiting.length === 0) return;
    this.broken = true;
    for (const reject of this.#waiting.splice(0)) reject(new DatabaseOutage('cut'));
  }

  private run(
    sql: string,
    values: readonly unknown[],
    name: string | undefined,
  ): Promise<QueryResult<unknown>> {
    // A statement of a transaction begun before the outage was known fails at once too.
    if (this.breaker?.open) return Promise.reject(new DatabaseOutage('at_once'));
    return new Promise((resolve, reject) => {
      if (this.#waiting.length === 0) this.#waitingSince = runningNow();
      this.#waiting.push(reject);
      this.client.query(
        {
          text: sql,
          values: values as unknown[],
          rowMode: 'array',
          ...(name !== undefined ? { name } : {}),
        },
        (error: Error | undefined, result: pg.QueryArrayResult) => {
          const index = this.#waiting.indexOf(reject);
          // Cut meanwhile: its caller already has its answer.
          if (index === -1) return;
          this.#waiting.splice(index, 1);
          this.#waitingSince = runningNow();
          if (!error) {
            resolve(this.toResult(result));
            return;
          }
          if (isDatabaseUnavailable(error)) this.broken = true;
          // A migration changed a table under a statement this connection prepared: the
          // connection is replaced, and outside a transaction the query runs again unnamed.
          if (name !== undefined && isStalePlan(error)) {
            this.broken = true;
            if (!this.#inTransaction) {
              this.run(sql, values, undefined).then(resolve, reject);
              return;
            }
          }
          reject(error);
        },
      );
    });
  }

  private toResult(result: pg.QueryArrayResult): QueryResult<unknown> {
    const build = this.rows.for(result.fields.map((field) => field.name));
    return {
      numAffectedRows: WRITES_AFFECTING_ROWS.has(result.command)
        ? BigInt(result.rowCount ?? 0)
        : undefined,
      rows: result.rows.map(build),
    };
  }
}
