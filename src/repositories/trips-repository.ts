import type { Insertable, Kysely, Selectable, Updateable } from 'kysely';
import type { Executor } from '../db/database.ts';
import type { DB, TripsTable } from '../db/schema.ts';
import type { TripStatus } from '../domain/states.ts';

export type TripRow = Selectable<TripsTable>;

export interface TripListFilter {
  afterId: string | null;
  limit: number;
  status?: TripStatus;
  publishedAtGte?: string;
}

export class TripsRepository {
  constructor(private readonly db: Kysely<DB>) {}

  findById(tenantId: string, id: string, trx: Executor = this.db): Promise<TripRow | undefined> {
    return trx
      .selectFrom('trips')
      .selectAll()
      .where('tenantId', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  /** Keyset page by id ascending; fetches `limit + 1` rows so the caller can tell `hasMore`. */
  list(tenantId: string, filter: TripListFilter, trx: Executor = this.db): Promise<TripRow[]> {
    let query = trx.selectFrom('trips').selectAll().where('tenantId', '=', tenantId);
    if (filter.status !== undefined) query = query.where('status', '=', filter.status);
    if (filter.publishedAtGte !== undefined) {
      query = query.where('publishedAt', '>=', filter.publishedAtGte);
    }
    if (filter.afterId !== null) query = query.where('id', '>', filter.afterId);
    return query
      .orderBy('id')
      .limit(filter.limit + 1)
      .execute();
  }

  insert(row: Insertable<TripsTable>, trx: Executor = this.db): Promise<TripRow> {
    return trx.insertInto('trips').values(row).returningAll().executeTakeFirstOrThrow();
  }

  update(
    tenantId: string,
    id: string,
    patch: Updateable<TripsTable>,
    trx: Executor = this.db,
    options: { bumpVersion?: boolean } = {},
  ): Promise<TripRow | undefined> {
    let query = trx.updateTable('trips').set(patch);
    // In SQL, so concurrent PATCHes each get their own version number.
    if (options.bumpVersion) query = query.set((eb) => ({ version: eb('version', '+', 1) }));
    return query
      .where('tenantId', '=', tenantId)
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst();
  }

  async numberTaken(tenantId: string, tripNumber: string, trx: Executor = this.db) {
    const row = await trx
      .selectFrom('trips')
      .select('id')
      .where('tenantId', '=', tenantId)
      .where('tripNumber', '=', tripNumber)
      .executeTakeFirst();
    return row !== undefined;
  }

  async count(tenantId: string, trx: Executor = this.db): Promise<number> {
    const row = await trx
      .selectFrom('trips')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('tenantId', '=', tenantId)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** Trip ids are global, but admin routes address them without a tenant: resolve it first. */
  findTenantOf(id: string, trx: Executor = this.db): Promise<string | undefined> {
    return trx
      .selectFrom('trips')
      .select('tenantId')
      .where('id', '=', id)
      .executeTakeFirst()
      .then((row) => row?.tenantId);
  }
}
