import type { Kysely } from 'kysely';

/**
 * `webhook_subscriptions.payload`: the form its deliveries take, `full` (every subscription made
 * before this) or `thin` (ids and the names of what changed; see domain/thin-payload.ts).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('webhook_subscriptions')
    .addColumn('payload', 'text', (c) => c.notNull().defaultTo('full'))
    .execute();
}
