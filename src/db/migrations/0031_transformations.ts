import type { Kysely } from 'kysely';

/**
 * `webhook_subscriptions.transformation`: the JavaScript run before each attempt (see
 * domain/transformation.ts), null for none; `retry_schedule`: the subscription's own waits
 * between attempts as written (a JSON array of durations), null for the deployment's. An
 * attempt a transformation cancelled is `webhook_attempts.cancelled`: it succeeded, and nothing
 * was sent.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhook_subscriptions').addColumn('transformation', 'text').execute();
  await db.schema.alterTable('webhook_subscriptions').addColumn('retry_schedule', 'text').execute();
  await db.schema
    .alterTable('webhook_attempts')
    .addColumn('cancelled', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
}
