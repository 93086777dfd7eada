import type { Kysely } from 'kysely';

/**
 * `worker_losses`: how many claims of a delivery died with their worker since its last recorded
 * attempt. A claim taken over after a crash is sent again under the same attempt number (the
 * cut-off attempt never counts as made); at the third loss in a row the delivery is dead-lettered
 * with `last_error` `worker_lost` (a crash loop, not the receiver).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('webhook_deliveries')
    .addColumn('worker_losses', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
}
