import type { Kysely } from 'kysely';

/**
 * Counters of rate-limiter-flexible's PostgreSQL store (used when several API processes share a
 * PostgreSQL database and no Redis). Its own shape; created here so schema changes stay in migrations.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('rate_limits')
    .addColumn('key', 'varchar(255)', (c) => c.primaryKey())
    .addColumn('points', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('expire', 'bigint')
    .execute();
}
