import type { Kysely } from 'kysely';

/**
 * The worker claims each subscription's due rows on their own (so one endpoint's backlog never
 * hides another's): an index walked per subscription in due order replaces the global one.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('webhook_deliveries_queue_idx')
    .on('webhook_deliveries')
    .columns(['subscription_id', 'status', 'next_attempt_at'])
    .execute();
  await db.schema.dropIndex('webhook_deliveries_due_idx').execute();
}
