import type { Kysely } from 'kysely';

/**
 * Events are queued for every subscriber in their own transaction (one delivery row each), so no
 * relay ever marked an event dispatched: the column was written as null and never read.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('events').dropColumn('dispatched_at').execute();
}
