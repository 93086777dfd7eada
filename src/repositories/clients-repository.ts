import type { Insertable, Kysely, Selectable, Updateable } from 'kysely';
import type { Executor } from '../db/database.ts';
import type { ClientsTable, DB } from '../db/schema.ts';
import type { CLIENT_KINDS } from '../domain/states.ts';
import { findOwningTenant } from './owning-tenant.ts';

export type ClientRow = Selectable<ClientsTable>;

export interface ClientListFilter {
  afterId: string | null;
  limit: number;
  kind?: (typeof CLIENT_KINDS)[number];
  archived?: boolean;
}

export class ClientsRepository {
  constructor(private readonly db: Kysely<DB>) {}

  findById(tenantId: string, id: string, trx: Executor = this.db): Promise<ClientRow | undefined> {
    return trx
      .selectFrom('clients')
      .selectAll()
      .where('tenantId', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  async exists(tenantId: string, id: string, trx: Executor = this.db): Promise<boolean> {
    const row = await trx
      .selectFrom('clients')
      .select('id')
      .where('tenantId', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
    return row !== undefined;
  }

  list(tenantId: string, filter: ClientListFilter, trx: Executor = this.db) {
    let query = trx.selectFrom('clients').selectAll().where('tenantId', '=', tenantId);
    if (filter.kind !== undefined) query = query.where('kind', '=', filter.kind);
    if (filter.archived === true) query = query.where('archivedAt', 'is not', null);
    if (filter.archived === false) query = query.where('archivedAt', 'is', null);
    if (filter.afterId !== null) query = query.where('id', '>', filter.afterId);
    return query
      .orderBy('id')
      .limit(filter.limit + 1)
      .execute();
  }

  insert(row: Insertable<ClientsTable>, trx: Executor = this.db): Promise<ClientRow> {
    return trx.insertInto('clients').values(row).returningAll().executeTakeFirstOrThrow();
  }

  update(tenantId: string, id: string, patch: Updateable<ClientsTable>, trx: Executor = this.db) {
    return trx
      .updateTable('clients')
      .set(patch)
      .where('tenantId', '=', tenantId)
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst();
  }

  findTenantOf(id: string, trx: Executor = this.db): Promise<string | undefined> {
    return findOwningTenant(trx, 'clients', id);
  }
}
