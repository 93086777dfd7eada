import { type Kysely, sql } from 'kysely';

/**
 * Endpoints that heal. Why a subscription is not active (`pause_reason`): `manual`,
 * `consecutive_failures`, `gone` (its receiver answered 410) or `deleted`; null while active.
 * Existing rows: a deleted one is `deleted`; a paused one whose owners were told of an auto-pause
 * at its pause time is `consecutive_failures`; any other paused one was paused by hand.
 *
 * Standard Webhooks' asymmetric signatures: `asymmetric_signatures`, the Ed25519 secret key
 * sealed like the HMAC key (`signing_key_pair`) and its public key (`public_key`, `whpk_…`);
 * a rotation retires the pair with the HMAC key (`retired_signing_keys` entries gain `pair`).
 *
 * `webhook_missed_events`: an event of a paused subscription's types, emitted while it was paused,
 * which it got no delivery for; `recover` with `missed: true` queues them and removes the rows.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('webhook_subscriptions')
    .addColumn('pause_reason', 'varchar(32)')
    .execute();
  await db.schema
    .alterTable('webhook_subscriptions')
    .addColumn('asymmetric_signatures', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .alterTable('webhook_subscriptions')
    .addColumn('signing_key_pair', 'text')
    .execute();
  await db.schema
    .alterTable('webhook_subscriptions')
    .addColumn('public_key', 'varchar(64)')
    .execute();
  await sql`
    update webhook_subscriptions set pause_reason = case
      when deleted_at is not null then 'deleted'
      when exists (
        select 1 from notifications n
        where n.subscription_id = webhook_subscriptions.id
          and n.kind = 'webhook_paused'
          and n.created_at = webhook_subscriptions.paused_at
      ) then 'consecutive_failures'
      else 'manual'
    end
    where active = 0 or deleted_at is not null`.execute(db);
  await db.schema
    .createTable('webhook_missed_events')
    .addColumn('subscription_id', 'varchar(40)', (c) =>
      c.notNull().references('webhook_subscriptions.id'),
    )
    .addColumn('event_id', 'varchar(36)', (c) => c.notNull().references('events.id'))
    .addColumn('tenant_id', 'varchar(40)', (c) => c.notNull())
    .addColumn('event_type', 'varchar(64)', (c) => c.notNull())
    .addColumn('object_key', 'varchar(64)')
    .addColumn('event_created_at', 'varchar(30)', (c) => c.notNull())
    .addPrimaryKeyConstraint('webhook_missed_events_pk', ['subscription_id', 'event_id'])
    .execute();
  await db.schema
    .createIndex('webhook_missed_events_window_idx')
    .on('webhook_missed_events')
    .columns(['subscription_id', 'event_created_at'])
    .execute();
  await db.schema
    .createIndex('webhook_missed_events_event_idx')
    .on('webhook_missed_events')
    .column('event_id')
    .execute();
}
