import { AsyncLocalStorage } from 'node:async_hooks';
import {
  CompiledQuery,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type Dialect,
  type DialectAdapter,
  type Driver,
  type Kysely,
  type QueryCompiler,
  type TransactionSettings,
} from 'kysely';

/** One transaction that every query of an async context joins (see AmbientDriver). */
export interface AmbientTransaction {
  /** Runs `fn` so that each of its queries, and each transaction it opens, joins this one. */
  run<T>(fn: () => Promise<T>): Promise<T>;
  commit(): Promise<void>;
  rollback(): Promise<void>;
}

interface Scope {
  /** Null once committed or rolled back: late queries of the context then get their own. */
  connection: DatabaseConnection | null;
  /** Open nested transactions, each a savepoint. */
  depth: number;
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
      const outer = await this.begin();
      let result: T;
      try {
        result = await outer.run(fn);
      } catch (error) {
        // The first failure is the one worth reporting; a failed rollback drops the connection.
        await outer.rollback().catch(() => undefined);
        throw error;
      }
      await outer.commit();
      return result;
    }
    scope.depth += 1;
    const name = `ambient_${scope.depth}`;
    try {
      await connection.executeQuery(CompiledQuery.raw(`savepoint ${name}`));
      let result: T;
      try {
        result = await fn();
      } catch (error) {
        await connection
          .executeQuery(CompiledQuery.raw(`rollback to savepoint ${name}`))
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

  /** Opens the outer transaction on a connection of its own. */
  async begin(): Promise<AmbientTransaction> {
    await this.init();
    const connection = await this.inner.acquireConnection();
    try {
      await this.inner.beginTransaction(connection, {});
    } catch (error) {
      await this.inner.releaseConnection(connection);
      throw error;
    }
    const scope: Scope = { connection, depth: 0 };
    const end = async (how: 'commit' | 'rollback') => {
      if (scope.connection === null) return;
      scope.connection = null;
      try {
        if (how === 'commit') await this.inner.commitTransaction(connection);
        else await this.inner.rollbackTransaction(connection);
      } finally {
        await this.inner.releaseConnection(connection);
      }
    };
    return {
      run: (fn) => this.scopes.run(scope, fn),
      commit: () => end('commit'),
      rollback: () => end('rollback'),
    };
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

  constructor(private readonly inner: Dialect) {}

  createDriver(): Driver {
    this.driver = new AmbientDriver(this.inner.createDriver(), this.scopes);
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

  transaction<T>(fn: () => Promise<T>): Promise<T> {
    return this.initialized().transaction(fn);
  }

  private initialized(): AmbientDriver {
    if (!this.driver) throw new Error('the database is not initialized');
    return this.driver;
  }
}
