import { EventEmitter } from 'node:events';
import { sql } from 'kysely';
import type { Database, Executor } from '../db/database.ts';

export const DELIVERIES_CHANNEL = 'tourops_deliveries';

/**
 * Wakes delivery workers when new deliveries are due: at once in this process, and on PostgreSQL
 * in every process through NOTIFY, which PostgreSQL sends when the transaction commits. Workers
 * also poll, so a lost signal only costs latency.
 */
export class DeliverySignal extends EventEmitter {
  constructor(private readonly database: Database) {
    super();
    this.setMaxListeners(0);
  }

  /** Called inside the transaction that wrote the rows. */
  async raise(trx: Executor): Promise<void> {
    if (this.database.dialect === 'postgres') {
      await sql`select pg_notify(${DELIVERIES_CHANNEL}, '')`.execute(trx);
    }
    // SQLite: the worker's claim waits for this transaction's lock, then sees its rows.
    this.emit('due');
  }

  /** A signal from another process (PgListener). */
  heard(): void {
    this.emit('due');
  }
}
