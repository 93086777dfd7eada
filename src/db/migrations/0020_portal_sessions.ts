import type { Kysely } from 'kysely';

/**
 * Webhook portal sessions: a one-time link (`link_hash`, valid until `link_expires_at`) that its
 * first use exchanges for a browser session (`session_hash`, until `expires_at`). Both secrets are
 * stored as SHA-256 digests only, like API tokens. `token_id` is the API token that asked for the
 * link (null when the operator did): revoking it ends the session.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const ts = 'varchar(30)';
  await db.schema
    .createTable('portal_sessions')
    .addColumn('id', 'varchar(40)', (c) => c.primaryKey())
    .addColumn('tenant_id', 'varchar(40)', (c) =>
      c.notNull().references('tenants.id').onDelete('cascade'),
    )
    .addColumn('token_id', 'varchar(40)', (c) => c.references('api_tokens.id').onDelete('cascade'))
    .addColumn('read_only', 'integer', (c) => c.notNull())
    .addColumn('link_hash', 'varchar(64)', (c) => c.notNull().unique())
    .addColumn('link_expires_at', ts, (c) => c.notNull())
    .addColumn('session_hash', 'varchar(64)', (c) => c.unique())
    .addColumn('expires_at', ts)
    .addColumn('created_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('portal_sessions_link_expiry_idx')
    .on('portal_sessions')
    .column('link_expires_at')
    .execute();
}
