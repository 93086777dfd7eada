import type { LeasedLimiter } from './leased-limiter.ts';
import type { LimiterStore } from './rate-limits.ts';

/**
 * Each subscription's `maxPerSecond`, counted in the store the API's rate limits use, so it holds
 * over every worker process (Redis or PostgreSQL; on the embedded database the primary's memory
 * under `serve --processes`, else this process's). One fixed one-second window per subscription,
 * each allowing the cap: a span of seconds can straddle one window more than it covers. Through a
 * LeasedLimiter like the API's limits: most takes need no round trip, near the cap each one does
 * and the count is exact, and a failed or frozen store leaves each process counting alone (the
 * cap then holds per process).
 */
export class DeliveryPacer {
  /** One limiter per rate in use (a limiter's points are fixed). */
  private readonly limiters = new Map<number, LeasedLimiter>();

  /** Opened by the first capped delivery: a worker whose subscriptions set no cap opens none. */
  private store: LimiterStore | null = null;
  /** Until the store first answers (a few seconds at most), takes wait for it, as the API does. */
  private ready: Promise<void> | null = null;

  constructor(private readonly open: () => LimiterStore) {}

  /** 0 when a delivery to the subscription may go now, else ms until its next window. */
  take(subscriptionId: string, perSecond: number): number | Promise<number> {
    if (this.store === null) {
      const store = this.open();
      this.store = store;
      this.ready = store.ready().then(() => {
        this.ready = null;
      });
    }
    if (this.ready !== null) return this.ready.then(() => this.take(subscriptionId, perSecond));
    let limiter = this.limiters.get(perSecond);
    if (limiter === undefined) {
      limiter = this.store.leased({
        keyPrefix: `rl_dlv_${perSecond}`,
        points: perSecond,
        duration: 1,
      });
      this.limiters.set(perSecond, limiter);
    }
    const take = limiter.take(subscriptionId);
    if (take instanceof Promise) return take.then((t) => (t.allowed ? 0 : t.msBeforeNext || 1));
    return take.allowed ? 0 : take.msBeforeNext || 1;
  }

  async close(): Promise<void> {
    for (const limiter of this.limiters.values()) limiter.close();
    await this.store?.close();
  }
}
