import { type Kysely, sql } from 'kysely';

/**
 * `ordering` per subscription (`none`, or `per_object`: one delivery per object in flight, in
 * sequence order), and each delivery's object (`object_key`: the booking, trip or client the
 * event is about), set at fan-out whatever the ordering, so turning it on covers what is queued.
 * Older deliveries have none and never wait. Claims for a `per_object` subscription ask,
 * per row, whether an earlier one of its object is still to go: the index answers that from the
 * unfinished rows alone.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('webhook_subscriptions')
    .addColumn('ordering', 'varchar(20)', (c) => c.notNull().defaultTo('none'))
    .execute();
  await db.schema.alterTable('webhook_deliveries').addColumn('object_key', 'varchar(64)').execute();
  await db.schema
    .createIndex('webhook_deliveries_object_idx')
    .on('webhook_deliveries')
    .columns(['subscription_id', 'object_key', 'sequence'])
    .where(sql.ref('status'), 'in', [sql.lit('pending'), sql.lit('in_flight')])
    .execute();
}
