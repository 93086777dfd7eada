import type { Kysely } from 'kysely';

/**
 * Broker destinations: a subscription's URL may name a RabbitMQ or NATS JetStream broker, with
 * credentials. The URL column keeps `***` in the password's place; the password itself is sealed
 * in `url_password` like the signing keys (null when the URL has none).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhook_subscriptions').addColumn('url_password', 'text').execute();
}
