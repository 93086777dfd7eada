import type { Kysely } from 'kysely';

/** Each attempt keeps the `Retry-After` its 429 or 503 answer carried, as received (cut to 100). */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhook_attempts').addColumn('retry_after', 'varchar(100)').execute();
}
