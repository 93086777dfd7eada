import type { Kysely } from 'kysely';

/**
 * `filter`: a subscription's payload filter as checked JSON (see domain/payload-filter.ts); null
 * takes every event of its types. Emit matches it in the event's own transaction, so an event it
 * refuses leaves no delivery, sequence or missed-event row for that subscription.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhook_subscriptions').addColumn('filter', 'text').execute();
}
