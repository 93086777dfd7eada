import { type Kysely, sql } from 'kysely';

/**
 * Events fired by `POST /api/v1/webhooks/test` are marked: their envelope says `"test": true`, and
 * their outcomes change no subscription counter, whatever their type (a test fire may now send a
 * sample of any event type).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('events')
    .addColumn('is_test', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await sql`update events set is_test = 1 where type = 'webhook.test'`.execute(db);
}
