import type { Insertable, Kysely } from 'kysely';
import type { Executor } from '../db/database.ts';
import type { DB, NotificationsTable } from '../db/schema.ts';

export class NotificationsRepository {
  constructor(private readonly db: Kysely<DB>) {}

  insertMany(rows: Insertable<NotificationsTable>[], trx: Executor = this.db): Promise<unknown> {
    if (rows.length === 0) return Promise.resolve();
    return trx.insertInto('notifications').values(rows).execute();
  }

  /** Newest first. */
  list(tenantId: string, trx: Executor = this.db) {
    return trx
      .selectFrom('notifications')
      .select(['id', 'recipient', 'memberId', 'kind', 'subscriptionId', 'createdAt'])
      .where('tenantId', '=', tenantId)
      .orderBy('id', 'desc')
      .execute();
  }
}
