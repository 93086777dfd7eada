import type { Kysely } from 'kysely';

/**
 * `erasures`: one person's data redacted on request (POST /api/v1/erasures). The subject is
 * resolved to client and booking ids when the erasure is made; `stage` and `cursor` say how far
 * the runner got, so that one killed part-way resumes where its last committed batch ended;
 * `redacted` counts what was changed, by store, in the same transactions. `lease_until` and
 * `lease_token` keep one runner on an erasure at a time. `subject_email` is cleared once done:
 * the record keeps no copy of what it removed.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('erasures')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('subject_kind', 'text', (c) => c.notNull())
    .addColumn('subject_id', 'text')
    .addColumn('subject_email', 'text')
    .addColumn('client_ids', 'text', (c) => c.notNull())
    .addColumn('booking_ids', 'text', (c) => c.notNull())
    .addColumn('stage', 'text', (c) => c.notNull())
    .addColumn('cursor', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('redacted', 'text', (c) => c.notNull())
    .addColumn('lease_until', 'text')
    .addColumn('lease_token', 'text')
    .addColumn('requested_at', 'text', (c) => c.notNull())
    .addColumn('started_at', 'text')
    .addColumn('completed_at', 'text')
    .execute();
  await db.schema
    .createIndex('erasures_open_idx')
    .on('erasures')
    .columns(['status', 'requested_at'])
    .execute();
  await db.schema.createIndex('erasures_tenant_idx').on('erasures').column('tenant_id').execute();
}
