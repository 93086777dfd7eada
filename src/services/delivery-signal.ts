import { EventEmitter } from 'node:events';
import { sql } from 'kysely';
import type { Database, Executor } from '../db/database.ts';

export const DELIVERIES_CHANNEL = 'tourops_deliveries';

/**
 * Wakes delivery workers when new deliveries are due. On PostgreSQL through NOTIFY alone, which is
 * sent when the transaction commits and heard by every process, this one included (its runtime
 * LISTENs): a wake before the commit would only claim rows not yet visible. On SQLite through an
 * in-process event. Workers also poll, so a lost signal only costs latency.
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
      return;
    }
    // SQLite: the worker's claim waits for this transaction's lock, then sees its rows.
    this.emit('due');
  }

  /** A signal from another process (PgListener). */
  heard(): void {
    this.emit('due');
  }
}
