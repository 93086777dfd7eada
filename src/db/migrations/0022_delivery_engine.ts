import { type Kysely, sql } from 'kysely';

/**
 * The delivery engine's promises at its edges.
 *
 * - `webhook_workers`: every running worker process, with a heartbeat; a delivery in flight names
 *   its worker (`claimed_by`), and one whose worker stopped beating is taken over at once, however
 *   young its claim (a live worker's claims are never taken, however old).
 * - `webhook_pacing`: each capped subscription's next free send slot (epoch microseconds), which
 *   every worker reserves its slots from (`maxPerSecond` as evenly spaced sends).
 * - `retired_signing_keys`: every key a rotation retired, each with the expiry promised for it
 *   (JSON `[{key, expiresAt}]`, sealed like the current key); replaces the single legacy key.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('webhook_workers')
    .addColumn('id', 'varchar(40)', (c) => c.primaryKey())
    .addColumn('started_at', 'varchar(30)', (c) => c.notNull())
    .addColumn('heartbeat_at', 'varchar(30)', (c) => c.notNull())
    .execute();
  await db.schema.alterTable('webhook_deliveries').addColumn('claimed_by', 'varchar(40)').execute();
  await db.schema
    .createTable('webhook_pacing')
    .addColumn('subscription_id', 'varchar(40)', (c) =>
      c.primaryKey().references('webhook_subscriptions.id').onDelete('cascade'),
    )
    .addColumn('next_slot_us', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .alterTable('webhook_subscriptions')
    .addColumn('retired_signing_keys', 'text', (c) => c.notNull().defaultTo('[]'))
    .execute();
  const legacy = await sql<{ id: string; key: string; expires_at: string }>`
    select id, legacy_signing_key as key, legacy_signing_key_expires_at as expires_at
    from webhook_subscriptions
    where legacy_signing_key is not null and legacy_signing_key_expires_at is not null`.execute(db);
  for (const row of legacy.rows) {
    const retired = JSON.stringify([{ key: row.key, expiresAt: row.expires_at }]);
    await sql`update webhook_subscriptions set retired_signing_keys = ${retired} where id = ${row.id}`.execute(
      db,
    );
  }
  await db.schema.alterTable('webhook_subscriptions').dropColumn('legacy_signing_key').execute();
  await db.schema
    .alterTable('webhook_subscriptions')
    .dropColumn('legacy_signing_key_expires_at')
    .execute();
}
