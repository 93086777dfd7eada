import { type RateLimiterAbstract, RateLimiterRes } from 'rate-limiter-flexible';
import { deadline } from '../lib/deadline.ts';

/** One request counted against one window. */
export interface Take {
  allowed: boolean;
  /** Points left in the window as this process sees them. */
  remaining: number;
  msBeforeNext: number;
}

interface Lease {
  /** Points taken from the store in advance and not spent yet. */
  left: number;
  /** The store's remaining points after the last take. */
  remaining: number;
  /** End of the store's window (ms since the epoch); the lease is void after it. */
  resetAt: number;
  /** The store refused: every request is refused here until resetAt. */
  blocked: boolean;
  refill: Promise<Take> | null;
  /** Size of the last chunk taken from the store, and when: the key's recent rate. */
  chunk: number;
  takenAt: number;
}

/** A lease never holds more than 1/DIVISOR of what is left, */
const CHUNK_DIVISOR = 8;
/** nor more than MIN_CHUNK points, or what the key spent in LEASE_TARGET_MS when that is more. */
const MIN_CHUNK = 16;
const LEASE_TARGET_MS = 100;
const SWEEP_INTERVAL_MS = 60_000;
const STORE_AVOID_MS = 1_000;

/**
 * Takes points from a rate-limiter-flexible store in small chunks and spends them locally, so most
 * requests are counted without a round trip (and synchronously), while the shared store still
 * bounds the total over every process: a point is always taken from the store before it is spent.
 *
 * The chunk is at most 1/8 of the window's remaining points (and 1 for the first request of a
 * window), so near the limit every request goes to the store and the count is exact; points a
 * process took and did not spend before the window ends are lost (at most 1/8 of what was left
 * when it took them). Within that bound a chunk is 16 points, or about 100 ms of the key's
 * traffic in this process when that is more, so a busy key goes to the store a few times a
 * second whatever its rate, and a quiet one holds few points. After a refusal the key is refused
 * locally until the window ends, so a flood of over-limit requests costs the store nothing.
 *
 * `exclusive`: the store is this process's own (the in-memory store of the embedded setup), so
 * nobody else can need the points: the second take of a window leases all that is left, and the
 * rest of the window is counted here, synchronously, still exactly.
 */
export class LeasedLimiter {
  private readonly leases = new Map<string, Lease>();
  private readonly sweeper: NodeJS.Timeout;

  private readonly now: () => number;
  private readonly exclusive: boolean;
  private readonly local: RateLimiterAbstract | null;
  private readonly storeTimeoutMs: number;
  /** Told of each answer the local count gave alone (a metric). */
  private readonly onLocalOnly: () => void;
  /** The store failed or timed out: until then the local count answers alone. */
  private storeAvoidedUntil = 0;

  constructor(
    private readonly store: RateLimiterAbstract,
    options: {
      now?: () => number;
      exclusive?: boolean;
      /**
       * This process's own count of every key, beside the shared store's: the one fallback. It
       * answers alone when the store fails or does not answer within `storeTimeoutMs` (a frozen
       * Redis or PostgreSQL accepts the request and never replies), and for a second after
       * (or until the late answer arrives); and
       * it refuses what this process alone would allow past the limit, so a store that flaps
       * (back empty after a restart) cannot let a process through more than the limit.
       */
      local?: RateLimiterAbstract;
      storeTimeoutMs?: number;
      onLocalOnly?: () => void;
    } = {},
  ) {
    this.now = options.now ?? Date.now;
    this.exclusive = options.exclusive ?? false;
    this.onLocalOnly = options.onLocalOnly ?? (() => {});
    this.local = options.local ?? null;
    this.storeTimeoutMs = options.storeTimeoutMs ?? 50;
    this.sweeper = setInterval(() => this.sweep(), SWEEP_INTERVAL_MS);
    this.sweeper.unref();
  }

  /** Counts one request of `key`: synchronous when a lease covers it. */
  take(key: string): Take | Promise<Take> {
    const now = this.now();
    let lease = this.leases.get(key);
    if (lease === undefined) {
      lease = {
        left: 0,
        remaining: 0,
        resetAt: 0,
        blocked: false,
        refill: null,
        chunk: 0,
        takenAt: 0,
      };
      this.leases.set(key, lease);
    }
    if (lease.refill) return lease.refill.then(() => this.take(key));
    if (now < lease.resetAt) {
      if (lease.blocked) return { allowed: false, remaining: 0, msBeforeNext: lease.resetAt - now };
      if (lease.left > 0) {
        lease.left -= 1;
        return {
          allowed: true,
          remaining: lease.remaining + lease.left,
          msBeforeNext: lease.resetAt - now,
        };
      }
    }
    return this.refill(key, lease, now);
  }

  close(): void {
    clearInterval(this.sweeper);
  }

  private refill(key: string, lease: Lease, now: number): Promise<Take> {
    let chunk = 1;
    if (now < lease.resetAt) {
      chunk = this.exclusive
        ? Math.max(1, lease.remaining)
        : Math.max(
            1,
            Math.min(Math.floor(lease.remaining / CHUNK_DIVISOR), this.demand(lease, now)),
          );
    }
    const refill = this.consume(key, chunk, now).then(
      (result) => {
        lease.chunk = chunk;
        lease.takenAt = now;
        const msBeforeNext = Math.max(1, result.msBeforeNext);
        lease.left = chunk - 1;
        lease.remaining = Math.max(0, result.remainingPoints);
        lease.resetAt = this.now() + msBeforeNext;
        lease.blocked = false;
        return { allowed: true, remaining: lease.remaining + lease.left, msBeforeNext };
      },
      (rejection: unknown): Take => {
        if (rejection instanceof RateLimiterRes) {
          const msBeforeNext = Math.max(1, rejection.msBeforeNext);
          lease.left = 0;
          lease.remaining = 0;
          lease.resetAt = this.now() + msBeforeNext;
          lease.blocked = true;
          return { allowed: false, remaining: 0, msBeforeNext };
        }
        // A store fault with no local count to answer (none is given): let the request through,
        // keep no lease.
        return { allowed: true, remaining: lease.remaining, msBeforeNext: 1_000 };
      },
    );
    lease.refill = refill.finally(() => {
      lease.refill = null;
    });
    return refill;
  }

  /** MIN_CHUNK, or what the last chunk's rate would spend in LEASE_TARGET_MS when that is more. */
  private demand(lease: Lease, now: number): number {
    const spent = lease.chunk - lease.left;
    const rate = spent / Math.max(1, now - lease.takenAt);
    return Math.max(MIN_CHUNK, Math.ceil(rate * LEASE_TARGET_MS));
  }

  /**
   * Takes `points` from the local count (a refusal there is final), then from the store, whose
   * refusal is final too; when the store fails or is slow, or is avoided, the local count's
   * answer stands.
   */
  private async consume(key: string, points: number, now: number): Promise<RateLimiterRes> {
    const local = this.local;
    if (local === null) return this.store.consume(key, points);
    const counted = await local.consume(key, points);
    if (now < this.storeAvoidedUntil) {
      this.onLocalOnly();
      return counted;
    }
    const answer = await this.storeAnswer(key, points);
    if (answer !== null) return answer;
    this.storeAvoidedUntil = this.now() + STORE_AVOID_MS;
    this.onLocalOnly();
    return counted;
  }

  /**
   * The store's result; null when it failed or did not answer in time. Refusals reject. The time
   * is a deadline (src/lib/deadline.ts): a stall of this process is not taken for a slow store.
   * An answer that comes after the time-out shows the store answers again: the avoidance ends
   * with it.
   */
  private storeAnswer(key: string, points: number): Promise<RateLimiterRes | null> {
    return new Promise((resolve, reject) => {
      let settled = false;
      let timedOut = false;
      const timer = deadline(this.storeTimeoutMs, () => {
        if (settled) return;
        timedOut = true;
        resolve(null);
      });
      const answered = (alive: boolean) => {
        settled = true;
        timer.cancel();
        if (alive && timedOut) this.storeAvoidedUntil = 0;
      };
      this.store.consume(key, points).then(
        (result) => {
          answered(true);
          resolve(result);
        },
        (rejection: unknown) => {
          const refusal = rejection instanceof RateLimiterRes;
          answered(refusal);
          if (refusal) reject(rejection);
          else resolve(null);
        },
      );
    });
  }

  private sweep(): void {
    const now = this.now();
    for (const [key, lease] of this.leases) {
      if (lease.resetAt <= now && lease.refill === null) this.leases.delete(key);
    }
  }
}
