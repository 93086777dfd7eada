import type { Insertable } from 'kysely';
import type { NotificationsTable } from '../db/schema.ts';
import { Repository } from './repository.ts';

export class NotificationsRepository extends Repository {
  insertMany(rows: Insertable<NotificationsTable>[]): Promise<unknown> {
    if (rows.length === 0) return Promise.resolve();
    return this.db.insertInto('notifications').values(rows).execute();
  }

  /** Newest first. */
  list(tenantId: string) {
    return this.db
      .selectFrom('notifications')
      .select(['id', 'recipient', 'memberId', 'kind', 'subscriptionId', 'createdAt'])
      .where('tenantId', '=', tenantId)
      .orderBy('id', 'desc')
      .execute();
  }
}
