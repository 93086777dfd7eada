import { type Kysely, sql } from 'kysely';

/**
 * Deliveries of a test fire are marked too, so that a subscription's `last24h` counts, read
 * from the deliveries alone, leave them out as every other counter does.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('webhook_deliveries')
    .addColumn('is_test', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await sql`update webhook_deliveries set is_test = 1
    where event_id in (select id from events where is_test = 1)`.execute(db);
}
