import type { Insertable, Kysely } from 'kysely';
import type { Executor } from '../db/database.ts';
import type { DB, EventsTable } from '../db/schema.ts';

export class EventsRepository {
  constructor(private readonly db: Kysely<DB>) {}

  insert(row: Insertable<EventsTable>, trx: Executor = this.db): Promise<unknown> {
    return trx.insertInto('events').values(row).execute();
  }

  listForTenant(tenantId: string, trx: Executor = this.db) {
    return trx
      .selectFrom('events')
      .selectAll()
      .where('tenantId', '=', tenantId)
      .orderBy('seq')
      .execute();
  }
}
