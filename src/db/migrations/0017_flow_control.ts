import { type Kysely, sql } from 'kysely';

/**
 * Receiver-driven flow control. Each subscription keeps its adaptive concurrency limit
 * (`concurrency_limit`, moved by the worker as it records outcomes), whether the last move was a
 * cut the endpoint asked for (`backed_off`), and the ceiling its owner set (`max_concurrency`).
 * Each attempt records the limit it was sent under.
 *
 * The in-flight index gains `subscription_id` first: claims count each subscription's attempts in
 * flight (in every worker process) to keep it within its limit, and the API shows the count. The
 * stale-claim sweep reads every in-flight row either way (there are few).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('webhook_subscriptions')
    .addColumn('max_concurrency', 'integer', (c) => c.notNull().defaultTo(16))
    .execute();
  await db.schema
    .alterTable('webhook_subscriptions')
    .addColumn('concurrency_limit', 'integer', (c) => c.notNull().defaultTo(4))
    .execute();
  await db.schema
    .alterTable('webhook_subscriptions')
    .addColumn('backed_off', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .alterTable('webhook_attempts')
    .addColumn('concurrency_limit', 'integer')
    .execute();
  await db.schema.dropIndex('webhook_deliveries_in_flight_idx').execute();
  await db.schema
    .createIndex('webhook_deliveries_in_flight_idx')
    .on('webhook_deliveries')
    .columns(['subscription_id', 'claimed_at'])
    .where(sql.ref('status'), '=', sql.lit('in_flight'))
    .execute();
}
