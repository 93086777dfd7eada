import type { Kysely } from 'kysely';
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
