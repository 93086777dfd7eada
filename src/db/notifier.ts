import cluster from 'node:cluster';
import { EventEmitter } from 'node:events';
import { sql } from 'kysely';
import type { Database } from './database.ts';

/** New deliveries are due (payload empty). */
export const DELIVERIES_CHANNEL = 'tourops_deliveries';
/** A token or tenant changed: caches drop it (payload JSON `{ tokenId }` or `{ tenantId }`). */
export const AUTH_CHANGES_CHANNEL = 'tourops_auth';

/**
 * A receiver asked to hold its endpoint (payload JSON `{ subscriptionId, until }`, epoch ms): every
 * worker stops starting attempts to it at once, before the hold is recorded.
 */
export const HOLDS_CHANNEL = 'tourops_holds';

export type Channel =
  | typeof DELIVERIES_CHANNEL
  | typeof AUTH_CHANGES_CHANNEL
  | typeof HOLDS_CHANNEL;

/**
 * The node:cluster message that carries a notification between the processes of `serve
 * --processes` on the embedded database: the primary hands it to every other process.
 */
export const CLUSTER_NOTIFY_MESSAGE = 'tourops:notify';
/** Channels relayed that way; the others are only a latency saving there, and cost a message. */
const RELAYED: ReadonlySet<string> = new Set([HOLDS_CHANNEL]);

/**
 * Tells every process that something happened; listeners subscribe with `on(channel, …)`. On
 * PostgreSQL through `pg_notify` alone: inside a transaction it is sent when the transaction
 * commits (a wake before the commit would only find rows not yet visible), and it is heard by every
 * LISTENing process, this one included (see PgListener and `heard`). The embedded database serves
 * one process, so there the event is emitted at once (a worker's claim then waits for the
 * writer's lock and sees its rows); under `serve --processes` the primary relays hold notices to
 * the other processes. Notifications only save latency: every consumer also polls or expires what
 * it caches.
 */
export class Notifier extends EventEmitter {
  constructor(private readonly database: Pick<Database, 'db' | 'dialect'>) {
    super();
    this.setMaxListeners(0);
    if (database.dialect === 'sqlite' && cluster.isWorker) {
      process.on('message', (message: { type?: string; channel?: Channel; payload?: string }) => {
        if (message?.type !== CLUSTER_NOTIFY_MESSAGE || message.channel === undefined) return;
        this.emit(message.channel, message.payload ?? '');
      });
    }
  }

  async publish(channel: Channel, payload = ''): Promise<void> {
    if (this.database.dialect === 'postgres') {
      await sql`select pg_notify(${channel}, ${payload})`.execute(this.database.db);
      return;
    }
    this.emit(channel, payload);
    if (cluster.isWorker && RELAYED.has(channel)) {
      process.send?.({ type: CLUSTER_NOTIFY_MESSAGE, channel, payload });
    }
  }

  /** A notification from PostgreSQL (PgListener). */
  heard(channel: Channel, payload: string): void {
    this.emit(channel, payload);
  }
}
