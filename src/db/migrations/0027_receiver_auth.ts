import type { Kysely } from 'kysely';

/**
 * Receiver authentication (HTTPS subscriptions): `receiver_auth` is what reads show (header names
 * and the scheme, every secret `***`), `receiver_secrets` the same in clear, sealed with
 * SECRET_KEY like the signing keys (bound to the subscription id). Both null when none is set.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhook_subscriptions').addColumn('receiver_auth', 'text').execute();
  await db.schema
    .alterTable('webhook_subscriptions')
    .addColumn('receiver_secrets', 'text')
    .execute();
}
