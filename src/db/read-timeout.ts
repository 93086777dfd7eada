import pg from 'pg';
import type { WatchedWaits } from './outage-breaker.ts';

/**
 * A pg `Client` class with a read time-out: a connection with a query outstanding and no answer
 * for `timeoutMs` is closed, so its queries fail at once ("Connection terminated", which
 * `isDatabaseUnavailable` counts) instead of waiting on a server that is frozen or unreachable.
 * A slow statement is the server's to end (`statement_timeout`, an answer); this is for the
 * server that cannot answer.
 *
 * pg's own `query_timeout` does this with a timer per query, and each of those timers kept its
 * query's parsed fields and rows alive into V8's old generation, so frequent mark-compacts put
 * stalls in the latency tail (bench/README.md). Here a query costs a counter and a timestamp, and
 * one sweep timer per pool checks its connections.
 */
export function clientWithReadTimeout(timeoutMs: number): typeof pg.Client & WatchedWaits {
  // Every client of the pool, for its whole life: per query nothing is added or removed (a set's
  // table resized by queries coming and going was itself old-generation garbage).
  const clients = new Set<WatchedClient>();
  const sweepEveryMs = Math.min(500, Math.max(20, Math.floor(timeoutMs / 8)));
  let sweeper: NodeJS.Timeout | null = null;

  const sweep = () => {
    const now = performance.now();
    for (const client of clients) {
      if (client.outstanding > 0 && now - client.waitingSince >= timeoutMs) client.giveUp();
    }
  };

  const query = pg.Client.prototype.query as (this: pg.Client, ...args: unknown[]) => unknown;

  class WatchedClient extends pg.Client {
    /** The oldest wait of any client's queries (the outage breaker's question). */
    static oldestWaitSince(): number | null {
      let oldest: number | null = null;
      for (const client of clients) {
        if (client.outstanding > 0 && (oldest === null || client.waitingSince < oldest)) {
          oldest = client.waitingSince;
        }
      }
      return oldest;
    }

    /** Fails the queries of every client that waits for answers (the breaker opened). */
    static cutWaits(): void {
      for (const client of clients) if (client.outstanding > 0) client.giveUp();
    }

    /** Queries sent and not answered yet. */
    outstanding = 0;
    /** When the server last answered, or the first outstanding query was sent after a pause. */
    waitingSince = 0;
    private readonly answered = () => {
      this.outstanding -= 1;
      this.waitingSince = performance.now();
    };

    constructor(config?: string | pg.ClientConfig) {
      super(config);
      clients.add(this);
      sweeper ??= setInterval(sweep, sweepEveryMs).unref();
      this.once('end', () => {
        clients.delete(this);
        if (clients.size === 0 && sweeper) {
          clearInterval(sweeper);
          sweeper = null;
        }
      });
    }

    /** Ends the connection at once: its queries fail, and no 'error' event is raised for it. */
    giveUp(): void {
      this.outstanding = 0;
      // end() marks the close as ours; in pipeline mode it then waits for the answers, so the
      // socket is destroyed too (pg then fails every query with "Connection terminated").
      this.end().catch(() => undefined);
      this.connection.stream.destroy();
    }

    watch(): () => void {
      if (this.outstanding === 0) this.waitingSince = performance.now();
      this.outstanding += 1;
      return this.answered;
    }
  }

  // pg's query() has a dozen overloads; the watch wraps whichever form is called. Submittables
  // (streaming cursors, which the app does not use) complete on their own terms: not watched.
  WatchedClient.prototype.query = function watchedQuery(
    this: WatchedClient,
    config: unknown,
    values?: unknown,
    callback?: unknown,
  ) {
    if (typeof (config as { submit?: unknown } | null)?.submit === 'function') {
      return query.call(this, config, values, callback);
    }
    const answered = this.watch();
    try {
      return watched(this, answered, config, values, callback);
    } catch (error) {
      answered();
      throw error;
    }
  } as typeof pg.Client.prototype.query;

  function watched(
    client: WatchedClient,
    answered: () => void,
    config: unknown,
    values: unknown,
    callback: unknown,
  ): unknown {
    if (typeof values === 'function') {
      return query.call(client, config, (error: unknown, result: unknown) => {
        answered();
        values(error, result);
      });
    }
    if (typeof callback === 'function') {
      return query.call(client, config, values, (error: unknown, result: unknown) => {
        answered();
        callback(error, result);
      });
    }
    const result = query.call(client, config, values) as Promise<unknown>;
    result.then(answered, answered);
    return result;
  }

  return WatchedClient;
}
