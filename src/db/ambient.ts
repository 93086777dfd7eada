import { AsyncLocalStorage } from 'node:async_hooks';
import { randomInt } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CompiledQuery,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type Dialect,
  type DialectAdapter,
  type Driver,
  type Kysely,
  type QueryCompiler,
  type QueryResult,
  type TransactionSettings,
} from 'kysely';

/** One transaction that every query of an async context joins (see AmbientDriver). */
export interface AmbientTransaction {
  /** Runs `fn` so that each of its queries, and each transaction it opens, joins this one. */
  run<T>(fn: () => Promise<T>): Promise<T>;
  /**
   * Runs `fn`, which sends one statement, in the transaction and commits it: on a pipelining
   * connection COMMIT follows that statement on the wire (one round trip for both), so `fn` must
   * send exactly one (a second fails) and do nothing that can fail after it. When the statement
   * fails, the server turns that COMMIT into a rollback and this throws the statement's error.
   */
  commitWith(fn: () => Promise<unknown>): Promise<void>;
  commit(): Promise<void>;
  rollback(): Promise<void>;
}

interface Scope {
  /** Null once committed or rolled back: late queries of the context then get their own. */
  connection: ScopeConnection | null;
  /** Open nested transactions, each a savepoint. */
  depth: number;
}

const ignore = () => undefined;

/**
 * A transaction's statements run one after another: two at once (a `Promise.all` inside a unit
 * of work) would interleave on its one connection, and their savepoints would no longer nest.
 * Refused loudly instead.
 */
function overlapping(): Error {
  return new Error(
    'overlapping statements in one transaction: run them one after another (await each; no Promise.all inside a unit of work)',
  );
}

/** Runs of a transaction's body that the server aborted for a conflict, the last one included. */
export const TRANSACTION_ATTEMPTS = 3;

/**
 * Whether the server aborted the transaction only because of a concurrent one (PostgreSQL's
 * serialization_failure and deadlock_detected): running the same body again is then safe, and
 * succeeds once the other has ended.
 */
export function isRetryable(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === '40001' || code === '40P01';
}

/**
 * The wait before a conflict's rerun. Run at once, the rerun can take its first row back before
 * the transaction that survived the conflict (woken, but not yet scheduled) locks it, and the two
 * deadlock again; a short random pause lets the survivor finish first.
 */
export function pauseBeforeRerun(attempt: number): Promise<void> {
  return sleep(randomInt(5, 25) * attempt);
}

/**
 * The connection of an ambient transaction. On a pipelining connection (pg's pipeline mode) it
 * sends BEGIN, SAVEPOINT and COMMIT without waiting for the answers of what went before: the
 * next statement follows them on the wire and waits for their answers with its own, so none of
 * them costs a round trip of its own. Elsewhere (SQLite) each is awaited where it is sent.
 */
class ScopeConnection implements DatabaseConnection {
  /** Statements sent ahead whose answers no one has awaited yet (their failure included). */
  #unanswered: Promise<unknown> | null = null;
  /** commitWith: COMMIT goes out right behind the next statement. */
  #commitBehindNext = false;
  #commit: Promise<unknown> | null = null;
  /** The statement sent and not answered yet: one at a time (see overlapping). */
  #running: Promise<unknown> | null = null;
  readonly #settled = () => {
    this.#running = null;
  };

  constructor(
    readonly inner: DatabaseConnection,
    readonly pipelined: boolean,
  ) {}

  /** Sends a statement whose answer the next statement (or `settle`) waits for. */
  async sendAhead(sql: string): Promise<void> {
    if (!this.pipelined) {
      await this.executeQuery(CompiledQuery.raw(sql));
      return;
    }
    if (this.#running !== null) throw overlapping();
    const sent = this.inner.executeQuery(CompiledQuery.raw(sql));
    const before = this.#unanswered;
    const unanswered = before === null ? sent : Promise.all([before, sent]);
    // Handled now, awaited later: a failure is not an unhandled rejection meanwhile.
    unanswered.catch(ignore);
    this.#unanswered = unanswered;
  }

  executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    if (this.#commit !== null) {
      return Promise.reject(new Error('commitWith: a second statement after the commit was sent'));
    }
    if (this.#running !== null) return Promise.reject(overlapping());
    const unanswered = this.#unanswered;
    this.#unanswered = null;
    const result = this.inner.executeQuery<R>(query);
    if (this.#commitBehindNext) {
      this.#commitBehindNext = false;
      this.#commit = this.inner.executeQuery(CompiledQuery.raw('commit'));
      this.#commit.catch(ignore);
    }
    let answer = result;
    if (unanswered !== null) {
      result.catch(ignore);
      // The first failure on the wire is the one that counts (the rest follow from it).
      answer = unanswered.then(() => result);
    }
    this.#running = answer;
    answer.then(this.#settled, this.#settled);
    return answer;
  }

  /** Resolves once no statement runs (whatever its outcome): ending the transaction waits. */
  async idle(): Promise<void> {
    while (this.#running !== null) await this.#running.catch(ignore);
  }

  async *streamQuery<R>(query: CompiledQuery, chunkSize: number) {
    await this.settle();
    yield* this.inner.streamQuery<R>(query, chunkSize);
  }

  /** Waits for the answers of the statements sent ahead; throws the first failure. */
  async settle(): Promise<void> {
    const unanswered = this.#unanswered;
    this.#unanswered = null;
    if (unanswered !== null) await unanswered;
  }

  /** Arms commitWith: the next statement takes a COMMIT behind it (when pipelined). */
  commitBehindNext(): void {
    this.#commitBehindNext = this.pipelined;
  }

  /** Disarms commitWith; the COMMIT sent behind its statement, or null when none was sent. */
  takeCommit(): Promise<unknown> | null {
    const commit = this.#commit;
    this.#commitBehindNext = false;
    this.#commit = null;
    return commit;
  }
}

/**
 * A driver whose connections can be bound to an async context: inside `AmbientTransaction.run`,
 * every query gets the context's connection (so repositories need no transaction argument, and
 * SQLite's single connection cannot deadlock against itself), and a nested transaction
 * (`transaction`, or Kysely's `db.transaction()`) becomes a savepoint, so its rollback still
 * undoes only its own writes. The one unit of work: `Database.withTransaction` runs here, and an
 * idempotent request's stored answer is written in the transaction of its side effect.
 */
class AmbientDriver implements Driver {
  private initialized: Promise<void> | null = null;

  constructor(
    private readonly inner: Driver,
    private readonly scopes: AsyncLocalStorage<Scope>,
    private readonly pipelined: boolean,
  ) {}

  init(): Promise<void> {
    // Once: `begin` may come before Kysely's own lazy initialization.
    this.initialized ??= this.inner.init();
    return this.initialized;
  }

  acquireConnection(): Promise<DatabaseConnection> {
    const connection = this.scopes.getStore()?.connection;
    return connection ? Promise.resolve(connection) : this.inner.acquireConnection();
  }

  async beginTransaction(
    connection: DatabaseConnection,
    settings: TransactionSettings,
  ): Promise<void> {
    const scope = this.scopeOf(connection);
    if (!scope) return this.inner.beginTransaction(connection, settings);
    scope.depth += 1;
    await connection.executeQuery(CompiledQuery.raw(`savepoint ambient_${scope.depth}`));
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    const scope = this.scopeOf(connection);
    if (!scope) return this.inner.commitTransaction(connection);
    await connection.executeQuery(CompiledQuery.raw(`release savepoint ambient_${scope.depth}`));
    scope.depth -= 1;
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    const scope = this.scopeOf(connection);
    if (!scope) return this.inner.rollbackTransaction(connection);
    const name = `ambient_${scope.depth}`;
    await connection.executeQuery(CompiledQuery.raw(`rollback to savepoint ${name}`));
    await connection.executeQuery(CompiledQuery.raw(`release savepoint ${name}`));
    scope.depth -= 1;
  }

  releaseConnection(connection: DatabaseConnection): Promise<void> {
    return this.scopeOf(connection) ? Promise.resolve() : this.inner.releaseConnection(connection);
  }

  destroy(): Promise<void> {
    return this.inner.destroy();
  }

  /**
   * Runs `fn` in the context's transaction as a savepoint, or else in a new transaction of its
   * own that its queries join. Savepoints of one context nest; they must not run concurrently.
   */
  async transaction<T>(fn: () => Promise<T>): Promise<T> {
    const scope = this.scopes.getStore();
    const connection = scope?.connection;
    if (!scope || !connection) {
      for (let attempt = 1; ; attempt++) {
        const outer = await this.begin();
        try {
          const result = await outer.run(fn);
          await outer.commit();
          return result;
        } catch (error) {
          // The first failure is the one worth reporting; a failed rollback drops the connection.
          await outer.rollback().catch(() => undefined);
          if (!isRetryable(error) || attempt === TRANSACTION_ATTEMPTS) throw error;
          await pauseBeforeRerun(attempt);
        }
      }
    }
    scope.depth += 1;
    const name = `ambient_${scope.depth}`;
    try {
      await connection.sendAhead(`savepoint ${name}`);
      let result: T;
      try {
        result = await fn();
        await connection.settle();
      } catch (error) {
        await connection
          .idle()
          .then(() => connection.settle())
          .catch(ignore)
          .then(() => connection.executeQuery(CompiledQuery.raw(`rollback to savepoint ${name}`)))
          .then(() => connection.executeQuery(CompiledQuery.raw(`release savepoint ${name}`)))
          .catch(() => undefined);
        throw error;
      }
      // Not released: the outer transaction's commit or rollback ends it with the rest, and
      // that saves a round trip. A later savepoint of the same depth reuses the name, and
      // `rollback to` goes back to the most recent one of a name, so each still undoes only its own.
      return result;
    } finally {
      scope.depth -= 1;
    }
  }

  /**
   * Opens the outer transaction on a connection of its own. Pipelined, BEGIN goes out ahead of
   * the first statement; a BEGIN that fails (the connection broke) fails that statement.
   */
  async begin(): Promise<AmbientTransaction> {
    await this.init();
    const inner = await this.inner.acquireConnection();
    const connection = new ScopeConnection(inner, this.pipelined);
    try {
      if (this.pipelined) await connection.sendAhead('begin');
      else await this.inner.beginTransaction(inner, {});
    } catch (error) {
      await this.inner.releaseConnection(inner);
      throw error;
    }
    const scope: Scope = { connection, depth: 0 };
    const end = async (how: 'commit' | 'rollback') => {
      if (scope.connection === null) return;
      scope.connection = null;
      try {
        // After whatever still runs (a refused overlap's sibling), through the scope's
        // connection, so that it waits for what went ahead (pipelined); both inner drivers end
        // a transaction with exactly this statement.
        await connection.idle();
        await connection.executeQuery(CompiledQuery.raw(how));
      } finally {
        await this.inner.releaseConnection(inner);
      }
    };
    const run = <T>(fn: () => Promise<T>) => this.scopes.run(scope, fn);
    const commitWith = async (fn: () => Promise<unknown>) => {
      if (scope.connection === null) throw new Error('commitWith: the transaction has ended');
      connection.commitBehindNext();
      let failure: { error: unknown } | null = null;
      try {
        await run(fn);
      } catch (error) {
        failure = { error };
      }
      const commit = connection.takeCommit();
      if (commit === null) {
        // Nothing went out with a COMMIT behind it (not pipelined, or fn failed before sending).
        if (failure) throw failure.error;
        return end('commit');
      }
      scope.connection = null;
      try {
        await commit;
      } finally {
        await this.inner.releaseConnection(inner);
      }
      if (failure) throw failure.error;
    };
    return { run, commitWith, commit: () => end('commit'), rollback: () => end('rollback') };
  }

  private scopeOf(connection: DatabaseConnection): Scope | undefined {
    const scope = this.scopes.getStore();
    return scope && scope.connection === connection ? scope : undefined;
  }
}

/** Wraps a dialect so its driver supports ambient transactions; `begin` opens one. */
export class AmbientDialect implements Dialect {
  private readonly scopes = new AsyncLocalStorage<Scope>();
  private driver: AmbientDriver | null = null;

  /**
   * `pipelined`: the inner driver's connections send a statement before the previous one is
   * answered (pg's pipeline mode), so transaction control statements need not wait for theirs.
   */
  constructor(
    private readonly inner: Dialect,
    private readonly options: { pipelined: boolean },
  ) {}

  createDriver(): Driver {
    this.driver = new AmbientDriver(this.inner.createDriver(), this.scopes, this.options.pipelined);
    return this.driver;
  }

  createQueryCompiler(): QueryCompiler {
    return this.inner.createQueryCompiler();
  }

  createAdapter(): DialectAdapter {
    return this.inner.createAdapter();
  }

  createIntrospector(db: Kysely<unknown>): DatabaseIntrospector {
    return this.inner.createIntrospector(db);
  }

  begin(): Promise<AmbientTransaction> {
    return this.initialized().begin();
  }

  /** Whether the calling async context runs inside an open transaction. */
  inTransaction(): boolean {
    return (this.scopes.getStore()?.connection ?? null) !== null;
  }

  transaction<T>(fn: () => Promise<T>): Promise<T> {
    return this.initialized().transaction(fn);
  }

  private initialized(): AmbientDriver {
    if (!this.driver) throw new Error('the database is not initialized');
    return this.driver;
  }
}
