import type { Insertable, Selectable, Updateable } from 'kysely';
import type { ClientsTable } from '../db/schema.ts';
import type { CLIENT_KINDS } from '../domain/states.ts';
import { Repository } from './repository.ts';

export type ClientRow = Selectable<ClientsTable>;

export interface ClientListFilter {
  afterId: string | null;
  limit: number;
  kind?: (typeof CLIENT_KINDS)[number];
  archived?: boolean;
}

export class ClientsRepository extends Repository {
  findById(tenantId: string, id: string): Promise<ClientRow | undefined> {
    return this.db
      .selectFrom('clients')
      .selectAll()
      .where('tenantId', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  /** The client, locked (see lockedRows): a change decided on what it read is the only one. */
  lockById(tenantId: string, id: string): Promise<ClientRow | undefined> {
    return this.lockedRows(
      this.db
        .selectFrom('clients')
        .selectAll()
        .where('tenantId', '=', tenantId)
        .where('id', '=', id),
    ).executeTakeFirst();
  }

  async exists(tenantId: string, id: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('clients')
      .select('id')
      .where('tenantId', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
    return row !== undefined;
  }

  list(tenantId: string, filter: ClientListFilter) {
    let query = this.db.selectFrom('clients').selectAll().where('tenantId', '=', tenantId);
    if (filter.kind !== undefined) query = query.where('kind', '=', filter.kind);
    if (filter.archived === true) query = query.where('archivedAt', 'is not', null);
    if (filter.archived === false) query = query.where('archivedAt', 'is', null);
    if (filter.afterId !== null) query = query.where('id', '>', filter.afterId);
    return query
      .orderBy('id')
      .limit(filter.limit + 1)
      .execute();
  }

  insert(row: Insertable<ClientsTable>): Promise<ClientRow> {
    return this.db.insertInto('clients').values(row).returningAll().executeTakeFirstOrThrow();
  }

  update(tenantId: string, id: string, patch: Updateable<ClientsTable>) {
    return this.db
      .updateTable('clients')
      .set(patch)
      .where('tenantId', '=', tenantId)
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst();
  }

  findTenantOf(id: string): Promise<string | undefined> {
    return this.owningTenant('clients', id);
  }
}
