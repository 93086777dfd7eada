import type { Insertable, Selectable, Updateable } from 'kysely';
import type { DB } from '../db/schema.ts';
import { Repository } from './repository.ts';

/** Tables of rows that move through a status machine, keyed by tenant and listed by id. */
type StatusTable = 'bookings' | 'payments';

export interface StatusListFilter<S extends string> {
  afterId: string | null;
  limit: number;
  status?: S;
}

/**
 * Bookings and payments share their queries: a read in the tenant (and a locked one for a change),
 * a keyset page with a status and a parent filter, and a transition that is a compare-and-set on
 * status besides. Only the table and the parent column differ.
 */
export abstract class StatusRowsRepository<T extends StatusTable> extends Repository {
  protected abstract readonly table: T;
  /** The column the list's parent filter applies to (`tripId` of a booking, …). */
  protected abstract readonly parentColumn: 'tripId' | 'bookingId';

  findById(tenantId: string, id: string): Promise<Selectable<DB[T]> | undefined> {
    return this.byId(tenantId, id).executeTakeFirst() as Promise<Selectable<DB[T]> | undefined>;
  }

  /**
   * The row, locked (see lockedRows): a change decided on what it read (the move, its
   * before-image, its time) is the only one made from that state.
   */
  lockById(tenantId: string, id: string): Promise<Selectable<DB[T]> | undefined> {
    return this.lockedRows(this.byId(tenantId, id)).executeTakeFirst() as Promise<
      Selectable<DB[T]> | undefined
    >;
  }

  /** The select of one row of the tenant by id. */
  private byId(tenantId: string, id: string) {
    return this.db
      .selectFrom(this.table as 'bookings')
      .selectAll()
      .where('tenantId', '=', tenantId)
      .where('id', '=', id);
  }

  /** Keyset page by id ascending; fetches `limit + 1` rows so the caller can tell `hasMore`. */
  protected page(
    tenantId: string,
    filter: StatusListFilter<string>,
    parentId: string | undefined,
  ): Promise<Selectable<DB[T]>[]> {
    let query = this.db
      .selectFrom(this.table as 'bookings')
      .selectAll()
      .where('tenantId', '=', tenantId);
    if (filter.status !== undefined) query = query.where('status', '=', filter.status as never);
    if (parentId !== undefined) query = query.where(this.parentColumn as 'tripId', '=', parentId);
    if (filter.afterId !== null) query = query.where('id', '>', filter.afterId);
    return query
      .orderBy('id')
      .limit(filter.limit + 1)
      .execute() as Promise<Selectable<DB[T]>[]>;
  }

  insert(row: Insertable<DB[T]>): Promise<Selectable<DB[T]>> {
    return this.db
      .insertInto(this.table as 'bookings')
      .values(row as never)
      .returningAll()
      .executeTakeFirstOrThrow() as Promise<Selectable<DB[T]>>;
  }

  /** Compare-and-set on status, so two concurrent transitions cannot both win. */
  transition(
    tenantId: string,
    id: string,
    from: DB[T]['status'],
    patch: Updateable<DB[T]>,
  ): Promise<Selectable<DB[T]> | undefined> {
    return this.db
      .updateTable(this.table as 'bookings')
      .set(patch as never)
      .where('tenantId', '=', tenantId)
      .where('id', '=', id)
      .where('status', '=', from as never)
      .returningAll()
      .executeTakeFirst() as Promise<Selectable<DB[T]> | undefined>;
  }

  findTenantOf(id: string): Promise<string | undefined> {
    return this.owningTenant(this.table, id);
  }
}
