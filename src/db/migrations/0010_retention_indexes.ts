import type { Kysely } from 'kysely';

/**
 * What retention needs to stay index-bound: old events are found by their creation time, and an
 * event is kept while a delivery still refers to it (also what SQLite's foreign-key check walks
 * when an event is deleted: without this index, a scan of every delivery per deleted event).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('webhook_deliveries_event_idx')
    .on('webhook_deliveries')
    .column('event_id')
    .execute();
  await db.schema.createIndex('events_created_idx').on('events').column('created_at').execute();
}
