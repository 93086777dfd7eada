import {
  CompiledQuery,
  type DatabaseConnection,
  type Driver,
  PostgresDialect,
  type QueryResult,
} from 'kysely';
import type pg from 'pg';
import { DatabaseOutage, type OutageBreaker } from './outage-breaker.ts';
import { statementName } from './prepared.ts';
import { type RowBuilders, storedParameters } from './row-builder.ts';
import { isDatabaseUnavailable } from './unavailable.ts';

/**
 * Kysely's PostgreSQL dialect with a driver of our own: its connections build camelCase row
 * objects from array rows (see RowBuilders), run `prepare`d statements under their names, and can
 * hold their writes so that statements sent back to back on a pipelining client leave in one
 * socket write (see `holdWrites`).
 */
export class PgDialect extends PostgresDialect {
  constructor(
    private readonly pool: pg.Pool,
    private readonly rows: RowBuilders,
    private readonly breaker: OutageBreaker | null,
  ) {
    super({ pool });
  }

  override createDriver(): Driver {
    return new PgDriver(this.pool, this.rows, this.breaker);
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
    private readonly breaker: OutageBreaker | null,
  ) {}

  async init(): Promise<void> {}

  async acquireConnection(): Promise<PgConnection> {
    const client = this.breaker
      ? await this.breaker.checkout(this.pool)
      : await this.pool.connect();
    let connection = this.connections.get(client);
    if (!connection) {
      connection = new PgConnection(client, this.rows, this.breaker);
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

/** 'I' idle, 'T' in a transaction, 'E' in a failed one (pg's last ReadyForQuery). */
function transactionStatus(client: pg.PoolClient): string | null {
  return (client as unknown as { getTransactionStatus(): string | null }).getTransactionStatus();
}

const WRITES_AFFECTING_ROWS = new Set(['INSERT', 'UPDATE', 'DELETE', 'MERGE']);

class PgConnection implements DatabaseConnection {
  /** The connection timed out or broke: dropped at release, not handed to the next request. */
  broken = false;
  #holding = false;

  constructor(
    private readonly client: pg.PoolClient,
    private readonly rows: RowBuilders,
    private readonly breaker: OutageBreaker | null,
  ) {
    // pg-pool listens for errors on idle clients only: a connection cut while checked out (the
    // server stopped mid-transaction) would otherwise be an uncaught 'error' that ends the
    // process. Listening for the client's whole life also costs nothing per checkout.
    client.on('error', () => {
      this.broken = true;
    });
  }

  executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const { sql, parameters } = query;
    return this.run(sql, storedParameters(parameters), statementName(sql)) as Promise<
      QueryResult<R>
    >;
  }

  // biome-ignore lint/correctness/useYield: streaming is refused, before any row.
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('streaming queries are not supported (pg pipeline mode refuses cursors)');
  }

  /**
   * Holds this connection's socket writes (a cork) until `releaseWrites`, or at the latest until
   * the current run of microtasks is over: a statement sent ahead (BEGIN, SAVEPOINT) then leaves
   * in one write with the statement that follows it. Each write to a local socket wakes the
   * server's process, which costs this process tens of µs of system time.
   */
  holdWrites(): void {
    if (this.#holding) return;
    this.#holding = true;
    this.client.connection.stream.cork();
    process.nextTick(() => this.releaseWrites());
  }

  releaseWrites(): void {
    if (!this.#holding) return;
    this.#holding = false;
    this.client.connection.stream.uncork();
  }

  release(): void {
    this.releaseWrites();
    this.client.release(this.broken ? true : undefined);
  }

  private run(
    sql: string,
    values: readonly unknown[],
    name: string | undefined,
  ): Promise<QueryResult<unknown>> {
    // A statement of a transaction begun before the outage was known fails at once too.
    if (this.breaker?.open) return Promise.reject(new DatabaseOutage());
    const client = this.client;
    return client
      .query({
        text: sql,
        values: values as unknown[],
        rowMode: 'array',
        ...(name !== undefined ? { name } : {}),
      })
      .then(
        (result: pg.QueryArrayResult) => {
          const build = this.rows.for(result.fields.map((field) => field.name));
          return {
            numAffectedRows: WRITES_AFFECTING_ROWS.has(result.command)
              ? BigInt(result.rowCount ?? 0)
              : undefined,
            rows: result.rows.map(build),
          };
        },
        (error: unknown) => {
          if (isDatabaseUnavailable(error)) this.broken = true;
          // A migration changed a table under a statement this connection prepared: the
          // connection is replaced, and outside a transaction the query runs again unnamed.
          if (name !== undefined && isStalePlan(error)) {
            this.broken = true;
            if (transactionStatus(client) === 'I') return this.run(sql, values, undefined);
          }
          throw error;
        },
      );
  }
}
