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

  /** One of the tenant's events, or undefined (another tenant's, or gone with retention). */
  find(tenantId: string, id: string) {
    return this.db
      .selectFrom('events')
      .select(['id', 'type', 'data', 'isTest', 'createdAt'])
      .where('tenantId', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  /** The tenant's newest event's `seq`, or 0. */
  async newestSeq(tenantId: string): Promise<number> {
    const row = await this.db
      .selectFrom('events')
      .select('seq')
      .where('tenantId', '=', tenantId)
      .orderBy('seq', 'desc')
      .limit(1)
      .executeTakeFirst();
    return row === undefined ? 0 : Number(row.seq);
  }

  /** The tenant's events (test fires excluded) after `afterSeq`, oldest first. */
  after(tenantId: string, afterSeq: number, limit: number) {
    return this.db
      .selectFrom('events')
      .select(['seq', 'id', 'type', 'data', 'isTest'])
      .where('tenantId', '=', tenantId)
      .where('seq', '>', afterSeq)
      .where('isTest', '=', false)
      .orderBy('seq')
      .limit(limit)
      .execute();
  }
}
