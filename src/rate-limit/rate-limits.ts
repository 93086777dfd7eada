import cluster from 'node:cluster';
import { Redis } from 'ioredis';
import type pg from 'pg';
import type { Logger } from 'pino';
import {
  type RateLimiterAbstract,
  RateLimiterCluster,
  RateLimiterMemory,
  RateLimiterPostgres,
  RateLimiterRedis,
} from 'rate-limiter-flexible';
import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import { LeasedLimiter, type Take } from './leased-limiter.ts';

/** The sustained window's state, sent as X-RateLimit-* on every authenticated response. */
interface RateState {
  limit: number;
  remaining: number;
  resetSeconds: number;
}

export type RateVerdict =
  | { allowed: true; state: RateState }
  | { allowed: false; state: RateState; retryAfterSeconds: number };

type Store = 'memory' | 'cluster' | 'redis' | 'postgres';

const REDIS_READY_WAIT_MS = 3_000;
/**
 * A shared store slower than this is skipped for a second (counted in process meanwhile): a
 * frozen store never holds a request longer. A live one on loopback answers in a few ms.
 */
const STORE_TIMEOUT_MS = 100;

/**
 * Per-token burst and sustained limits and the per-IP guard, counted by
 * rate-limiter-flexible: in memory for the embedded database, in Redis when REDIS_URL is set, else
 * in PostgreSQL, so several API processes share one count (the processes of `tourops serve
 * --processes N` on the embedded database share the primary's). Each process also keeps its own
 * count, the one fallback: when the shared store fails or is slow it answers alone (the API
 * keeps answering, limited per process), and it never lets one process allow more than the
 * limit. Each store is read through a LeasedLimiter, so most requests are counted
 * synchronously, without a round trip to the store.
 */
export class RateLimits {
  private constructor(
    readonly store: Store,
    private readonly burst: LeasedLimiter,
    private readonly sustained: LeasedLimiter,
    private readonly ip: LeasedLimiter,
    private readonly perMin: number,
    private readonly onClose: () => Promise<void>,
  ) {}

  static async create(config: Config, database: Database, logger: Logger): Promise<RateLimits> {
    const { burstPerSec, perMin, ipPerMin } = config.rateLimit;
    const specs = [
      { keyPrefix: 'rl_burst', points: burstPerSec, duration: 1 },
      { keyPrefix: 'rl_min', points: perMin, duration: 60 },
      { keyPrefix: 'rl_ip', points: ipPerMin, duration: 60 },
    ];
    const memory = (spec: (typeof specs)[number]) => new RateLimiterMemory(spec);

    if (config.redisUrl) {
      const redis = new Redis(config.redisUrl, {
        // Fail fast while disconnected: the local count answers instead of queueing.
        enableOfflineQueue: false,
        maxRetriesPerRequest: 1,
        lazyConnect: false,
        // A frozen server accepts commands and never answers: they fail instead of piling up
        // (requests themselves never wait this long, see LeasedLimiter's store time-out).
        commandTimeout: 1_000,
        connectTimeout: 2_000,
      });
      let lastWarning = 0;
      redis.on('error', (error) => {
        if (Date.now() - lastWarning > 10_000) {
          lastWarning = Date.now();
          logger.warn(
            { err: error },
            'Redis unreachable: rate limits fall back to per-process memory',
          );
        }
      });
      // Start serving with the shared counters when Redis answers in time; otherwise the local
      // counts answer until it does (requests are never held up by Redis).
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, REDIS_READY_WAIT_MS);
        redis.once('ready', () => {
          clearTimeout(timer);
          resolve();
        });
      });
      const limiters = specs.map(
        (spec) =>
          new RateLimiterRedis({
            ...spec,
            storeClient: redis,
            rejectIfRedisNotReady: true,
          }),
      );
      return RateLimits.leased('redis', limiters, perMin, async () => {
        redis.disconnect();
      });
    }
    if (database.dialect === 'postgres' && database.pool) {
      const pool = database.pool as pg.Pool;
      // A first connection now, so the first requests' counts do not wait for a connect (and
      // time out into per-process counting).
      await pool.query('select 1').catch(() => undefined);
      const limiters = specs.map(
        (spec) =>
          new RateLimiterPostgres({
            ...spec,
            storeClient: pool,
            storeType: 'pool',
            tableName: 'rate_limits',
            tableCreated: true,
          }),
      );
      return RateLimits.leased('postgres', limiters, perMin, async () => undefined);
    }
    if (cluster.isWorker) {
      // One of `tourops serve --processes N` on the embedded database: the primary holds the
      // counters (rate-limiter-flexible's cluster store, over IPC), so the N processes share one
      // count, leased in chunks like any shared store's.
      const limiters = specs.map((spec) => new RateLimiterCluster({ ...spec, timeoutMs: 1_000 }));
      return RateLimits.leased('cluster', limiters, perMin, async () => undefined);
    }
    return RateLimits.leased('memory', specs.map(memory), perMin, async () => undefined);
  }

  private static leased(
    store: Store,
    limiters: RateLimiterAbstract[],
    perMin: number,
    onClose: () => Promise<void>,
  ): RateLimits {
    const exclusive = store === 'memory';
    const [burst, sustained, ip] = limiters.map(
      (limiter) =>
        new LeasedLimiter(limiter, {
          exclusive,
          local: exclusive
            ? undefined
            : new RateLimiterMemory({
                points: limiter.points,
                duration: limiter.duration,
                keyPrefix: limiter.keyPrefix,
              }),
          storeTimeoutMs: STORE_TIMEOUT_MS,
        }),
    );
    return new RateLimits(store, burst, sustained, ip, perMin, onClose);
  }

  /** Counts a request from `address`; null when allowed, else seconds to wait. */
  checkIp(address: string): number | null | Promise<number | null> {
    const take = this.ip.take(address);
    return take instanceof Promise ? take.then(ipVerdict) : ipVerdict(take);
  }

  /** Counts a request of the token against the burst and the sustained window together. */
  checkToken(tokenId: string): RateVerdict | Promise<RateVerdict> {
    const burst = this.burst.take(tokenId);
    const sustained = this.sustained.take(tokenId);
    if (burst instanceof Promise || sustained instanceof Promise) {
      return Promise.all([burst, sustained]).then(([b, s]) => this.verdict(b, s));
    }
    return this.verdict(burst, sustained);
  }

  close(): Promise<void> {
    for (const limiter of [this.burst, this.sustained, this.ip]) limiter.close();
    return this.onClose();
  }

  private verdict(burst: Take, sustained: Take): RateVerdict {
    const state: RateState = {
      limit: this.perMin,
      remaining: sustained.remaining,
      resetSeconds: Math.max(1, Math.ceil(sustained.msBeforeNext / 1000)),
    };
    if (burst.allowed && sustained.allowed) return { allowed: true, state };
    const waits = [burst, sustained].filter((t) => !t.allowed).map((t) => t.msBeforeNext);
    return {
      allowed: false,
      state,
      retryAfterSeconds: Math.max(1, Math.ceil(Math.max(...waits) / 1000)),
    };
  }
}

function ipVerdict(take: Take): number | null {
  return take.allowed ? null : Math.max(1, Math.ceil(take.msBeforeNext / 1000));
}
