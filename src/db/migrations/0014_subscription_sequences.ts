import { type Kysely, sql } from 'kysely';

/**
 * Per-subscription event sequence (the ledger): each delivery of an event carries its
 * subscription's `sequence` (a redelivery its original's; test fires none), and each subscription
 * has one counter row in a table of its own, so that taking a number locks that row only, never
 * the subscription row the worker updates with every outcome. Deliveries from before this
 * migration have no sequence; a subscription's first event after it takes 1.
 *
 * `standard_webhooks`: the subscription also gets the Standard Webhooks headers.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('webhook_sequences')
    .addColumn('subscription_id', 'varchar(40)', (c) =>
      c.primaryKey().references('webhook_subscriptions.id'),
    )
    .addColumn('tenant_id', 'varchar(40)', (c) => c.notNull().references('tenants.id'))
    .addColumn('last_sequence', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.alterTable('webhook_deliveries').addColumn('sequence', 'bigint').execute();
  // The pull API walks a subscription's ledger in sequence order; each sequence's newest row
  // (the highest id) is its latest delivery.
  await db.schema
    .createIndex('webhook_deliveries_sequence_idx')
    .on('webhook_deliveries')
    .columns(['subscription_id', 'sequence', 'id'])
    .where(sql.ref('sequence'), 'is not', null)
    .execute();
  await db.schema
    .alterTable('webhook_subscriptions')
    .addColumn('standard_webhooks', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
}
