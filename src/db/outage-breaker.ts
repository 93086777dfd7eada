import pg from 'pg';
import { runningNow } from '../lib/deadline.ts';

/**
 * What a request gets while the database is known to be out: a 503 (isDatabaseUnavailable).
 * `way`: `cut`, its wait ended as the breaker opened; `at_once`, it began with the breaker open.
 */
export class DatabaseOutage extends Error {
  readonly code = 'EDBOUTAGE';
  constructor(readonly way: 'cut' | 'at_once') {
    super('the database is not answering (its health probe got no answer)');
  }
}

export interface OutageBreakerOptions {
  /** A statement or checkout unanswered this long makes the breaker probe. */
  probeAfterMs: number;
  /** A statement or checkout unanswered this long, beside a probe unanswered, is an outage. */
  outageAfterMs: number;
  /** A probe unanswered this long is unanswered. */
  probeTimeoutMs: number;
  /** How often waits are checked, and, while out, the probe is tried again. */
  checkEveryMs: number;
  /**
   * The clock of the waits and the probe (ms): the running clock unless a test's. Time this
   * process was stalled says nothing of the database (src/lib/deadline.ts).
   */
  now?: () => number;
}

/** Whether the server answers: see ProbeConnection. */
export interface Probe {
  ask(now: number, since: number): 'answered' | 'waiting' | 'unanswered';
  close(): void;
}

/** What the breaker watches: the connections' statements (see PgStatements). */
export interface WatchedWaits {
  /** The time (the breaker's clock) of the oldest statement still waiting for its answer, or null. */
  oldestWaitSince(): number | null;
  /** Fails every waiting statement at once (their connections are dropped). */
  cutWaits(): void;
}

/**
 * A circuit breaker on the PostgreSQL pool. Every wait a request has is bounded by its own
 * time-outs (statement, connect), which a frozen or unreachable server makes each request wait
 * out in full. Instead: when any statement or checkout has waited `probeAfterMs`, one probe
 * (`select 1` on a connection of the breaker's own) asks whether the server answers at all. A
 * wait of `outageAfterMs` beside a probe unanswered for `probeTimeoutMs` opens the breaker: the
 * waits are cut, and every new statement or checkout fails at once (503 with Retry-After) until
 * the probe is answered, which closes it.
 * A slow statement on a healthy server is not an outage: the probe is answered, and the
 * statement time-out still applies.
 */
export class OutageBreaker {
  #open = false;
  #openedAt = 0;
  /** How to fail each checkout still waiting when the breaker opens. */
  readonly #waiting = new Set<(error: Error) => void>();
  readonly #now: () => number;
  #timer: NodeJS.Timeout;
  /** Checkouts waiting for a connection, and since when the first of them waits. */
  #checkouts = 0;
  #checkoutsSince = 0;

  constructor(
    private readonly probe: Probe,
    private readonly statements: WatchedWaits,
    private readonly options: OutageBreakerOptions,
  ) {
    this.#now = options.now ?? runningNow;
    this.#timer = setInterval(() => this.check(), options.checkEveryMs).unref();
  }

  /** Whether the database is known to be out: statements and checkouts fail at once. */
  get open(): boolean {
    return this.#open;
  }

  /**
   * A pool checkout under the breaker: fails at once while it is open, and when it opens while
   * the checkout waits (a full pool of stuck connections, or a new one to a server that does
   * not answer); a connection handed out after that goes back to the pool.
   */
  async checkout(pool: pg.Pool): Promise<pg.PoolClient> {
    if (this.#open) throw new DatabaseOutage('at_once');
    // Watched even with idle connections: waiters queued earlier may take them first.
    if (this.#checkouts++ === 0) this.#checkoutsSince = this.#now();
    const checkout = pool.connect();
    // A tripwire of this checkout's own: a promise raced by every checkout would keep, for as
    // long as it stays pending (the whole life of a healthy pool), a reaction of each of them.
    let trip: (error: Error) => void = () => undefined;
    const tripped = new Promise<never>((_resolve, reject) => {
      trip = reject;
    });
    this.#waiting.add(trip);
    try {
      return await Promise.race([checkout, tripped]);
    } catch (error) {
      checkout.then(
        (client) => client.release(),
        () => undefined,
      );
      throw error;
    } finally {
      this.#waiting.delete(trip);
      this.#checkouts -= 1;
    }
  }

  close(): void {
    clearInterval(this.#timer);
    this.probe.close();
  }

  private check(): void {
    const now = this.#now();
    if (this.#open) {
      if (this.probe.ask(now, this.#openedAt) === 'answered') this.#open = false;
      return;
    }
    const statement = this.statements.oldestWaitSince();
    const since =
      this.#checkouts > 0 && (statement === null || this.#checkoutsSince < statement)
        ? this.#checkoutsSince
        : statement;
    if (since === null || now - since < this.options.probeAfterMs) return;
    // A recent answer (since the wait began, and within probeAfterMs) tells enough: the server
    // answers, the wait is slow. An older one may predate a freeze: asked again.
    const probe = this.probe.ask(now, Math.max(since, now - this.options.probeAfterMs));
    if (probe !== 'unanswered' || now - since < this.options.outageAfterMs) return;
    this.#open = true;
    this.#openedAt = now;
    for (const trip of this.#waiting) trip(new DatabaseOutage('cut'));
    this.#waiting.clear();
    this.statements.cutWaits();
  }
}

/**
 * The breaker's own connection, with at most one `select 1` outstanding: `ask` sends one when
 * none is, and says whether the last one was answered, is still within its time, or is not. A
 * connection that failed, or whose probe is long overdue (a half-open socket), is replaced.
 */
export class ProbeConnection implements Probe {
  #client: pg.Client | null = null;
  /** When the outstanding probe was sent; null when none is. */
  #sentAt: number | null = null;
  /** When a probe was last answered. */
  #answeredAt = Number.NEGATIVE_INFINITY;
  /** When a probe last failed without an answer (its connection refused or cut). */
  #failedAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly connectionString: string,
    private readonly timeoutMs: number,
    private readonly now: () => number = runningNow,
  ) {}

  /**
   * 'answered' when a probe was answered at or after `since`; else one is sent (unless one is
   * outstanding): 'waiting' while it is within its time, 'unanswered' after.
   */
  ask(now: number, since: number): 'answered' | 'waiting' | 'unanswered' {
    if (this.#answeredAt >= since) return 'answered';
    if (this.#sentAt === null) {
      // One failed since (refused, reset): that is no answer, and the next probe goes out now.
      const failed = this.#failedAt >= since;
      this.send(now);
      return failed ? 'unanswered' : 'waiting';
    }
    const waited = now - this.#sentAt;
    if (waited < this.timeoutMs) return 'waiting';
    // Long overdue: the answer may never come on this socket; a new connection asks next.
    if (waited >= 4 * this.timeoutMs) this.replace();
    return 'unanswered';
  }

  close(): void {
    this.replace();
  }

  private send(now: number): void {
    this.#sentAt = now;
    const client = this.connected();
    client.query('select 1').then(
      () => {
        if (client !== this.#client) return;
        this.#answeredAt = this.now();
        this.#sentAt = null;
      },
      () => this.failed(client),
    );
  }

  private connected(): pg.Client {
    if (this.#client !== null) return this.#client;
    const client = new pg.Client({
      connectionString: this.connectionString,
      connectionTimeoutMillis: this.timeoutMs,
      application_name: 'tourops health probe',
    });
    // A probe's connection failing is what it is there to find out: never an uncaught error.
    client.on('error', () => this.failed(client));
    client.connect().catch(() => undefined);
    this.#client = client;
    return client;
  }

  /** The connection failed: an outstanding probe counts as failed, and it is replaced. */
  private failed(client: pg.Client): void {
    if (client !== this.#client) return;
    if (this.#sentAt !== null) this.#failedAt = this.now();
    this.replace();
  }

  /** Drops the connection (not awaited: a frozen server never answers its goodbye). */
  private replace(): void {
    const client = this.#client;
    this.#client = null;
    this.#sentAt = null;
    client?.end().catch(() => undefined);
  }
}
