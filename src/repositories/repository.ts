import { type Kysely, type RawBuilder, sql } from 'kysely';
import type { Database, Dialect } from '../db/database.ts';
import type { DB } from '../db/schema.ts';

/** Tables whose rows belong to a tenant and are addressed by a global id. */
type TenantTable = 'trips' | 'bookings' | 'payments' | 'clients' | 'webhookSubscriptions';

/**
 * What every repository holds: the database handle (whose statements join the caller's unit of
 * work, see Database.withTransaction) and the dialect, given once at construction.
 */
export abstract class Repository {
  protected readonly db: Kysely<DB>;
  protected readonly dialect: Dialect;

  constructor(database: Pick<Database, 'db' | 'dialect'>) {
    this.db = database.db;
    this.dialect = database.dialect;
  }

  /**
   * `<column> IN (<select>)` for keys a subquery chooses. On PostgreSQL `= any(array(…))`: the
   * subquery runs once and the rows are found by key (with IN, or an OR of two, the planner may
   * pick a plan that walks the whole table, history included).
   */
  protected keyIn(column: string, select: RawBuilder<unknown>): RawBuilder<unknown> {
    return this.dialect === 'postgres'
      ? sql`${sql.ref(column)} = any(array(${select}))`
      : sql`${sql.ref(column)} in (${select})`;
  }

  /**
   * The rows a select reads, locked until the transaction ends (PostgreSQL; SQLite transactions
   * are serial already), for a change decided on what was read. FOR NO KEY UPDATE, not FOR
   * UPDATE: every insert of a row referencing a locked one (a foreign key) holds FOR KEY SHARE on
   * it, which FOR UPDATE would wait for while that insert's transaction waited for this lock in
   * turn: a deadlock.
   */
  protected lockedRows<Q extends { forNoKeyUpdate(): Q }>(query: Q): Q {
    return this.dialect === 'postgres' ? query.forNoKeyUpdate() : query;
  }

  /**
   * Rows another transaction holds are passed over (PostgreSQL); SQLite runs each writing
   * statement under its single write lock, so there is nothing to skip.
   */
  protected skipLocked(alias: string): RawBuilder<unknown> {
    return this.dialect === 'postgres' ? sql`for update of ${sql.raw(alias)} skip locked` : sql``;
  }

  /**
   * The tenant that owns a row, for the admin API, which addresses rows by id alone. Ids are
   * globally unique, so no tenant is needed to find the owner.
   */
  protected owningTenant(table: TenantTable, id: string): Promise<string | undefined> {
    return this.db
      .selectFrom(table as 'trips')
      .select('tenantId')
      .where('id', '=', id)
      .executeTakeFirst()
      .then((row) => row?.tenantId);
  }
}
