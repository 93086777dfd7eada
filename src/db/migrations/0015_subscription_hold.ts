import type { Kysely } from 'kysely';

/**
 * `held_until`: a receiver's 429 or 503 with `Retry-After` holds every delivery to its endpoint
 * until then (at most an hour); claims skip the subscription meanwhile, in every worker process.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('webhook_subscriptions')
    .addColumn('held_until', 'varchar(30)')
    .execute();
}
