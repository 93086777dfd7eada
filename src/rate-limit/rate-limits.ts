import { Redis } from 'ioredis';
import type pg from 'pg';
import type { Logger } from 'pino';
import {
  type RateLimiterAbstract,
  RateLimiterMemory,
  RateLimiterPostgres,
  RateLimiterRedis,
  RateLimiterRes,
} from 'rate-limiter-flexible';
import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';

/** The sustained window's state, sent as X-RateLimit-* on every authenticated response. */
export interface RateState {
  limit: number;
  remaining: number;
  resetSeconds: number;
}

export type RateVerdict =
  | { allowed: true; state: RateState }
  | { allowed: false; state: RateState; retryAfterSeconds: number };

type Store = 'memory' | 'redis' | 'postgres';

const REDIS_READY_WAIT_MS = 3_000;

/**
 * Per-token burst and sustained limits and the per-IP guard (api-spec 8), counted by
 * rate-limiter-flexible: in memory for the embedded database, in Redis when REDIS_URL is set, else
 * in PostgreSQL, so several API processes share one count. When the shared store fails, each
 * limiter falls back to an in-memory one (the API keeps answering, limited per process) and a
 * warning is logged.
 */
export class RateLimits {
  private constructor(
    readonly store: Store,
    private readonly burst: RateLimiterAbstract,
    private readonly sustained: RateLimiterAbstract,
    private readonly ip: RateLimiterAbstract,
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
        // Fail fast while disconnected: the insurance limiter answers instead of queueing.
        enableOfflineQueue: false,
        maxRetriesPerRequest: 1,
        lazyConnect: false,
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
      // Start serving with the shared counters when Redis answers in time; otherwise the in-memory
      // insurance limiters answer until it does (requests are never held up by Redis).
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, REDIS_READY_WAIT_MS);
        redis.once('ready', () => {
          clearTimeout(timer);
          resolve();
        });
      });
      const [burst, sustained, ip] = specs.map(
        (spec) =>
          new RateLimiterRedis({
            ...spec,
            storeClient: redis,
            rejectIfRedisNotReady: true,
            insuranceLimiter: memory(spec),
          }),
      );
      return new RateLimits('redis', burst, sustained, ip, perMin, async () => {
        redis.disconnect();
      });
    }
    if (database.dialect === 'postgres' && database.pool) {
      const pool = database.pool as pg.Pool;
      const [burst, sustained, ip] = specs.map(
        (spec) =>
          new RateLimiterPostgres({
            ...spec,
            storeClient: pool,
            storeType: 'pool',
            tableName: 'rate_limits',
            tableCreated: true,
            insuranceLimiter: memory(spec),
          }),
      );
      return new RateLimits('postgres', burst, sustained, ip, perMin, async () => undefined);
    }
    const [burst, sustained, ip] = specs.map(memory);
    return new RateLimits('memory', burst, sustained, ip, perMin, async () => undefined);
  }

  /** Counts a request from `address`; null when allowed, else seconds to wait. */
  async checkIp(address: string): Promise<number | null> {
    try {
      await this.ip.consume(address);
      return null;
    } catch (rejection) {
      return retryAfter(rejection);
    }
  }

  /** Counts a request of the token against the burst and the sustained window together. */
  async checkToken(tokenId: string): Promise<RateVerdict> {
    const [burst, sustained] = await Promise.all([
      settle(this.burst.consume(tokenId)),
      settle(this.sustained.consume(tokenId)),
    ]);
    const state: RateState = {
      limit: this.perMin,
      remaining: Math.max(0, sustained.result.remainingPoints),
      resetSeconds: Math.max(1, Math.ceil(sustained.result.msBeforeNext / 1000)),
    };
    if (burst.allowed && sustained.allowed) return { allowed: true, state };
    const waits = [burst, sustained].filter((r) => !r.allowed).map((r) => r.result.msBeforeNext);
    return {
      allowed: false,
      state,
      retryAfterSeconds: Math.max(1, Math.ceil(Math.max(...waits) / 1000)),
    };
  }

  close(): Promise<void> {
    return this.onClose();
  }
}

async function settle(
  consumption: Promise<RateLimiterRes>,
): Promise<{ allowed: boolean; result: RateLimiterRes }> {
  try {
    return { allowed: true, result: await consumption };
  } catch (rejection) {
    if (rejection instanceof RateLimiterRes) return { allowed: false, result: rejection };
    // A store error the insurance limiter did not absorb: let the request through.
    return { allowed: true, result: new RateLimiterRes(1, 0, 1, false) };
  }
}

function retryAfter(rejection: unknown): number | null {
  if (rejection instanceof RateLimiterRes)
    return Math.max(1, Math.ceil(rejection.msBeforeNext / 1000));
  return null;
}
