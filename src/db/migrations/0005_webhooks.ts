import type { Kysely } from 'kysely';

/**
 * Webhook subscriptions and their delivery rows. A delivery is written in the
 * transaction of the event it carries; the worker claims due rows through `deliveries_due_idx`.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const ts = 'varchar(30)';
  await db.schema
    .createTable('webhook_subscriptions')
    .addColumn('id', 'varchar(40)', (c) => c.primaryKey())
    .addColumn('tenant_id', 'varchar(40)', (c) => c.notNull().references('tenants.id'))
    .addColumn('url', 'varchar(2048)', (c) => c.notNull())
    .addColumn('events', 'text', (c) => c.notNull())
    .addColumn('active', 'integer', (c) => c.notNull())
    .addColumn('paused_at', ts)
    .addColumn('deleted_at', ts)
    .addColumn('consecutive_failures', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('client_error_run', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('client_error_run_since', ts)
    .addColumn('last_success_at', ts)
    .addColumn('last_failure_at', ts)
    .addColumn('signing_key', 'text', (c) => c.notNull())
    .addColumn('legacy_signing_key', 'text')
    .addColumn('legacy_signing_key_expires_at', ts)
    .addColumn('created_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('webhook_subscriptions_tenant_idx')
    .on('webhook_subscriptions')
    .columns(['tenant_id', 'id'])
    .execute();

  await db.schema
    .createTable('webhook_deliveries')
    .addColumn('id', 'varchar(40)', (c) => c.primaryKey())
    .addColumn('tenant_id', 'varchar(40)', (c) => c.notNull().references('tenants.id'))
    .addColumn('subscription_id', 'varchar(40)', (c) =>
      c.notNull().references('webhook_subscriptions.id'),
    )
    .addColumn('event_id', 'varchar(36)', (c) => c.notNull().references('events.id'))
    .addColumn('event_type', 'varchar(40)', (c) => c.notNull())
    .addColumn('status', 'varchar(20)', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('last_response_status', 'integer')
    .addColumn('next_attempt_at', ts)
    .addColumn('delivered_at', ts)
    .addColumn('claimed_at', ts)
    .addColumn('redelivered_from_id', 'varchar(40)')
    .addColumn('created_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_subscription_idx')
    .on('webhook_deliveries')
    .columns(['subscription_id', 'id'])
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_due_idx')
    .on('webhook_deliveries')
    .columns(['status', 'next_attempt_at'])
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_claimed_idx')
    .on('webhook_deliveries')
    .columns(['status', 'claimed_at'])
    .execute();
}
