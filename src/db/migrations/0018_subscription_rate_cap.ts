import type { Kysely } from 'kysely';

/**
 * `max_per_second`: the most deliveries a second to the subscription, over every worker process
 * (null: no cap). Counted in the rate-limit store, not here.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('webhook_subscriptions')
    .addColumn('max_per_second', 'integer')
    .execute();
}
