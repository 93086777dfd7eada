import type { Insertable, Selectable, Updateable } from 'kysely';
import { prepare } from '../db/prepared.ts';
import type { TripsTable } from '../db/schema.ts';
import type { TripStatus } from '../domain/states.ts';
import { Repository } from './repository.ts';

export type TripRow = Selectable<TripsTable>;

export interface TripListFilter {
  afterId: string | null;
  limit: number;
  status?: TripStatus;
  publishedAtGte?: string;
}

export class TripsRepository extends Repository {
  private readonly byId = prepare(this.db, (tenantId: string, id: string) =>
    this.db.selectFrom('trips').selectAll().where('tenantId', '=', tenantId).where('id', '=', id),
  );
  /** One compiled page query per combination of filters (at most eight). */
  private readonly pages = new Map<string, ReturnType<typeof this.preparePage>>();

  async findById(tenantId: string, id: string) {
    const [row] = await this.byId(tenantId, id);
    return row as TripRow | undefined;
  }

  /**
   * The trip, locked (see lockedRows), so that a change decided on what it read is the only one
   * made from that state, beside the bookings inserted under it.
   */
  lockById(tenantId: string, id: string): Promise<TripRow | undefined> {
    return this.lockedRows(
      this.db.selectFrom('trips').selectAll().where('tenantId', '=', tenantId).where('id', '=', id),
    ).executeTakeFirst();
  }

  /** Keyset page by id ascending; fetches `limit + 1` rows so the caller can tell `hasMore`. */
  list(tenantId: string, filter: TripListFilter): Promise<TripRow[]> {
    const shape = {
      status: filter.status !== undefined,
      publishedAtGte: filter.publishedAtGte !== undefined,
      afterId: filter.afterId !== null,
    };
    const key = `${+shape.status}${+shape.publishedAtGte}${+shape.afterId}`;
    let page = this.pages.get(key);
    if (!page) {
      page = this.preparePage(shape);
      this.pages.set(key, page);
    }
    const params: [string, ...string[]] = [tenantId];
    if (filter.status !== undefined) params.push(filter.status);
    if (filter.publishedAtGte !== undefined) params.push(filter.publishedAtGte);
    if (filter.afterId !== null) params.push(filter.afterId);
    return page(filter.limit + 1, ...params);
  }

  private preparePage(shape: { status: boolean; publishedAtGte: boolean; afterId: boolean }) {
    return prepare(this.db, (limit: number, tenantId: string, ...rest: string[]) => {
      let query = this.db.selectFrom('trips').selectAll().where('tenantId', '=', tenantId);
      const next = () => rest.shift() as string;
      if (shape.status) query = query.where('status', '=', next() as TripStatus);
      if (shape.publishedAtGte) query = query.where('publishedAt', '>=', next());
      if (shape.afterId) query = query.where('id', '>', next());
      return query.orderBy('id').limit(limit);
    });
  }

  insert(row: Insertable<TripsTable>): Promise<TripRow> {
    return this.db.insertInto('trips').values(row).returningAll().executeTakeFirstOrThrow();
  }

  /**
   * `fromStatus`: a compare-and-set, the row changes only while it is still in that status (two
   * concurrent transitions cannot both win; the loser finds no row).
   */
  update(
    tenantId: string,
    id: string,
    patch: Updateable<TripsTable>,
    options: { bumpVersion?: boolean; fromStatus?: TripStatus } = {},
  ): Promise<TripRow | undefined> {
    let query = this.db.updateTable('trips').set(patch);
    // In SQL, so concurrent PATCHes each get their own version number.
    if (options.bumpVersion) query = query.set((eb) => ({ version: eb('version', '+', 1) }));
    if (options.fromStatus !== undefined) query = query.where('status', '=', options.fromStatus);
    return query
      .where('tenantId', '=', tenantId)
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst();
  }

  async numberTaken(tenantId: string, tripNumber: string) {
    const row = await this.db
      .selectFrom('trips')
      .select('id')
      .where('tenantId', '=', tenantId)
      .where('tripNumber', '=', tripNumber)
      .executeTakeFirst();
    return row !== undefined;
  }

  async count(tenantId: string): Promise<number> {
    const row = await this.db
      .selectFrom('trips')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('tenantId', '=', tenantId)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** Trip ids are global, but admin routes address them without a tenant: resolve it first. */
  findTenantOf(id: string): Promise<string | undefined> {
    return this.owningTenant('trips', id);
  }
}
