import { type Kysely, sql } from 'kysely';
import type { Dialect } from '../database.ts';

/**
 * Rate-limit counters are disposable (losing them in a crash only resets windows), so on
 * PostgreSQL their table skips the write-ahead log: each counter upsert then commits without a
 * WAL flush, which under load on one token was what serialized requests on the hot rows.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect !== 'postgres') return;
  await sql`alter table rate_limits set unlogged`.execute(db);
}
