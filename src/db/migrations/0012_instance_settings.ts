import type { Kysely } from 'kysely';

/**
 * Values about the installation itself, one row a name: the first is `secret_key_check`, a
 * known text sealed under SECRET_KEY, so that a start with another key is refused at once
 * instead of failing every delivery it signs.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('instance_settings')
    .addColumn('name', 'varchar(100)', (c) => c.primaryKey())
    .addColumn('value', 'text', (c) => c.notNull())
    .execute();
}
