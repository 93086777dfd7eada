import type { Kysely } from 'kysely';
import type { Executor } from '../db/database.ts';
import type { DB } from '../db/schema.ts';

export class NotificationsRepository {
  constructor(private readonly db: Kysely<DB>) {}

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
