import type { Kysely } from 'kysely';

/**
 * Every HTTP attempt of a delivery, for the customer to see what their endpoint answered (or why
 * it did not), and the last error class on the delivery itself.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const ts = 'varchar(30)';
  await db.schema
    .createTable('webhook_attempts')
    .addColumn('id', 'varchar(40)', (c) => c.primaryKey())
    .addColumn('tenant_id', 'varchar(40)', (c) => c.notNull())
    // Deleted with their delivery (retention).
    .addColumn('delivery_id', 'varchar(40)', (c) =>
      c.notNull().references('webhook_deliveries.id').onDelete('cascade'),
    )
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('started_at', ts, (c) => c.notNull())
    .addColumn('duration_ms', 'integer', (c) => c.notNull())
    .addColumn('status', 'integer')
    .addColumn('error_class', 'varchar(30)')
    .addColumn('response_body', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('webhook_attempts_delivery_idx')
    .on('webhook_attempts')
    .columns(['delivery_id', 'id'])
    .execute();
  await db.schema.alterTable('webhook_deliveries').addColumn('last_error', 'varchar(30)').execute();
}
