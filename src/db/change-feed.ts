import { sql } from 'kysely';
import type { Database } from './database.ts';

export const AUTH_CHANGES_CHANNEL = 'tourops_auth';

/**
 * Tells other processes that something they may cache has changed. On PostgreSQL that is
 * `pg_notify` (heard through `PgListener`); the embedded database serves one process, so there
 * it is a no-op and the cache's own expiry covers the CLI.
 */
export class ChangeFeed {
  constructor(private readonly database: Database) {}

  async publish(channel: string, payload: Record<string, string>): Promise<void> {
    if (this.database.dialect !== 'postgres') return;
    await sql`select pg_notify(${channel}, ${JSON.stringify(payload)})`.execute(this.database.db);
  }
}
