import type { Clock } from '../lib/clock.ts';

/**
 * How long a claim for reopened slots waits for other subscriptions' slots to reopen too. The
 * subscription still has half its limit running, and a claim costs about the same for one
 * subscription as for several: without the wait, a backlog for a few subscriptions claimed one
 * subscription's share at a time.
 */
const REOPEN_COALESCE_MS = 3;

/**
 * When the claim loop wakes: a signal (new rows, slots reopening, a retry or a send slot falling
 * due), or the poll interval. Also the timed waits of deliveries for their send slots, all cut
 * short by stop.
 */
export class Wakes {
  /** Set by every signal; the loop claims again before it sleeps if one came meanwhile. */
  signalled = true;
  private wake: (() => void) | null = null;
  private timer: NodeJS.Timeout | null = null;
  private timerAt = Number.POSITIVE_INFINITY;
  /** A signal for reopened slots, deferred REOPEN_COALESCE_MS (see reopened). */
  private reopenTimer: NodeJS.Timeout | null = null;
  private readonly waits = new Set<() => void>();
  private reads: Promise<void> | null = null;
  private stopped = false;

  constructor(
    private readonly clock: Clock,
    private readonly pollIntervalMs: number,
  ) {}

  readonly signal = (): void => {
    this.signalled = true;
    this.wake?.();
  };

  /** A claim begins: it takes what a held-back signal would have claimed for. */
  claimStarts(): void {
    this.clearReopen();
    this.signalled = false;
  }

  /**
   * Slots reopened: signals REOPEN_COALESCE_MS from now, so that slots reopening meanwhile (other
   * subscriptions', as attempts end) are claimed for by one claim.
   */
  reopened(): void {
    this.reopenTimer ??= setTimeout(() => {
      this.reopenTimer = null;
      this.signal();
    }, REOPEN_COALESCE_MS);
  }

  /** A subscription's attempts run low: signals at once, unless a reopened claim is due anyway. */
  low(): void {
    if (this.reopenTimer === null) this.signal();
  }

  /** Signals at `ms` (epoch), if that is before the next poll would come anyway. */
  at(ms: number): void {
    if (this.stopped || ms >= this.timerAt) return;
    const delay = Math.max(0, ms - this.clock.now().getTime());
    if (delay >= this.pollIntervalMs) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = ms;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.timerAt = Number.POSITIVE_INFINITY;
      this.signal();
    }, delay + 1);
    this.timer.unref();
  }

  /** Sleeps until a signal, the poll interval, or stop. */
  sleep(ms = this.pollIntervalMs): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      const self = this;
      function done() {
        clearTimeout(timer);
        if (self.wake === done) self.wake = null;
        resolve();
      }
      this.wake = done;
      if (this.signalled || this.stopped) done();
    });
  }

  /**
   * Resolves once the event loop has read its sockets: a timer runs before that read, so after a
   * stall a hold notice that arrived in time would otherwise be read only after a start. One
   * setImmediate serves every start of a turn: they resume together, and their sends leave in one
   * turn (a broker client writes a turn's publishes to its socket at once, not one by one).
   */
  afterReads(): Promise<void> {
    this.reads ??= new Promise((resolve) =>
      setImmediate(() => {
        this.reads = null;
        resolve();
      }),
    );
    return this.reads;
  }

  /** Resolves once the clock reads `ms` (epoch) or later, or at stop. */
  async until(ms: number): Promise<void> {
    for (;;) {
      const left = ms - this.clock.now().getTime();
      if (left <= 0 || this.stopped) return;
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.waits.delete(done);
          resolve();
        };
        const timer = setTimeout(done, Math.ceil(left));
        this.waits.add(done);
      });
    }
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.clearReopen();
    for (const done of [...this.waits]) done();
    this.wake?.();
  }

  private clearReopen(): void {
    if (this.reopenTimer === null) return;
    clearTimeout(this.reopenTimer);
    this.reopenTimer = null;
  }
}
