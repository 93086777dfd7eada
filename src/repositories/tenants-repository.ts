import type { Insertable, Selectable, Updateable } from 'kysely';
import type { TenantsTable } from '../db/schema.ts';
import { Repository } from './repository.ts';

export type TenantRow = Selectable<TenantsTable>;

/** Tenants are the root of scoping, so these lookups are by their own id (admin and CLI only). */
export class TenantsRepository extends Repository {
  findById(id: string): Promise<TenantRow | undefined> {
    return this.db.selectFrom('tenants').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** Operators type either; ids (`ten_…`) and slugs cannot collide. */
  findByIdOrSlug(idOrSlug: string): Promise<TenantRow | undefined> {
    return this.db
      .selectFrom('tenants')
      .selectAll()
      .where((eb) => eb.or([eb('id', '=', idOrSlug), eb('slug', '=', idOrSlug)]))
      .executeTakeFirst();
  }

  findBySlug(slug: string): Promise<TenantRow | undefined> {
    return this.db.selectFrom('tenants').selectAll().where('slug', '=', slug).executeTakeFirst();
  }

  /**
   * The tenant row, locked (see lockedRows): quota checks of one tenant take turns, beside the
   * idempotency claims and trips inserted under it.
   */
  lockForQuota(id: string) {
    return this.lockedRows(
      this.db.selectFrom('tenants').selectAll().where('id', '=', id),
    ).executeTakeFirst();
  }

  async insert(row: Insertable<TenantsTable>): Promise<TenantRow> {
    return this.db.insertInto('tenants').values(row).returningAll().executeTakeFirstOrThrow();
  }

  update(id: string, patch: Updateable<TenantsTable>) {
    return this.db
      .updateTable('tenants')
      .set(patch)
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst();
  }

  /** Every tenant, oldest first (ids are time-ordered). */
  list(): Promise<TenantRow[]> {
    return this.db.selectFrom('tenants').selectAll().orderBy('id').execute();
  }

  count(): Promise<number> {
    return this.db
      .selectFrom('tenants')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow()
      .then((row) => Number(row.n));
  }
}
