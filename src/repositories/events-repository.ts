import type { Insertable } from 'kysely';
import type { EventsTable } from '../db/schema.ts';
import { Repository } from './repository.ts';

export class EventsRepository extends Repository {
  insert(row: Insertable<EventsTable>): Promise<unknown> {
    return this.db.insertInto('events').values(row).execute();
  }

  listForTenant(tenantId: string) {
    return this.db
      .selectFrom('events')
      .selectAll()
      .where('tenantId', '=', tenantId)
      .orderBy('seq')
      .execute();
  }
}
