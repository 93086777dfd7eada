import cluster from 'node:cluster';
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

/** What a limiter counts: `points` per `duration` seconds, keys prefixed `keyPrefix`. */
interface LimiterSpec {
  keyPrefix: string;
  points: number;
  duration: number;
}

/** Where rate-limit counters live, and limiters over it. */
interface LimiterStore {
  readonly kind: Store;
  /** A limiter over the store. */
  limiter(spec: LimiterSpec): RateLimiterAbstract;
  /** Counts of a limiter over the store, leased (see LeasedLimiter); `onLocalOnly` as there. */
  leased(spec: LimiterSpec, onLocalOnly?: () => void): LeasedLimiter;
  /** Resolves once the store answers, or after a few seconds: never fails. */
  ready(): Promise<void>;
  close(): Promise<void>;
}

const REDIS_READY_WAIT_MS = 3_000;
/**
 * A shared store slower than this is skipped for a second (counted in process meanwhile): a
 * frozen store never holds a request longer. A live one on loopback answers in a few ms.
 */
const STORE_TIMEOUT_MS = 100;

/**
 * The store rate-limiter-flexible counts in: Redis when REDIS_URL is set, else PostgreSQL, so
 * several processes share one count (the processes of `tourops serve --processes N` on the
 * embedded database share the primary's, over IPC), else this process's memory.
 */
async function openLimiterStore(
  config: Config,
  database: Database,
  logger: Logger,
): Promise<LimiterStore> {
  if (config.redisUrl) {
    // Loaded only where REDIS_URL is set.
    const { Redis } = await import('ioredis');
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
    return limiterStore(
      'redis',
      (spec) => new RateLimiterRedis({ ...spec, storeClient: redis, rejectIfRedisNotReady: true }),
      // Start with the shared counters when Redis answers in time; otherwise the local counts
      // answer until it does (nothing is held up by Redis).
      () =>
        new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, REDIS_READY_WAIT_MS);
          redis.once('ready', () => {
            clearTimeout(timer);
            resolve();
          });
        }),
      async () => {
        redis.disconnect();
      },
    );
  }
  if (database.dialect === 'postgres' && database.pool) {
    const pool = database.pool as pg.Pool;
    return limiterStore(
      'postgres',
      (spec) =>
        new RateLimiterPostgres({
          ...spec,
          storeClient: pool,
          storeType: 'pool',
          tableName: 'rate_limits',
          tableCreated: true,
        }),
      // A first connection now, so the first counts do not wait for a connect (and time out
      // into per-process counting).
      async () => {
        await pool.query('select 1').catch(() => undefined);
      },
    );
  }
  if (cluster.isWorker) {
    // One of `tourops serve --processes N` on the embedded database: the primary holds the
    // counters (rate-limiter-flexible's cluster store, over IPC).
    return limiterStore('cluster', (spec) => new RateLimiterCluster({ ...spec, timeoutMs: 1_000 }));
  }
  return limiterStore('memory', (spec) => new RateLimiterMemory(spec));
}

function limiterStore(
  kind: Store,
  limiter: (spec: LimiterSpec) => RateLimiterAbstract,
  ready: () => Promise<void> = async () => undefined,
  close: () => Promise<void> = async () => undefined,
): LimiterStore {
  // This process's own memory: nobody else can need its points.
  const exclusive = kind === 'memory';
  return {
    kind,
    limiter,
    leased: (spec, onLocalOnly) =>
      new LeasedLimiter(limiter(spec), {
        exclusive,
        local: exclusive ? undefined : new RateLimiterMemory(spec),
        storeTimeoutMs: STORE_TIMEOUT_MS,
        onLocalOnly,
      }),
    ready,
    close,
  };
}

/**
 * Per-token burst and sustained limits and the per-IP guard, counted by rate-limiter-flexible in
 * the limiter store (see openLimiterStore). Each process also keeps its own count, the one
 * fallback: when the shared store fails or is slow it answers alone (the API keeps answering,
 * limited per process), and it never lets one process allow more than the limit. Each store is
 * read through a LeasedLimiter, so most requests are counted synchronously, without a round trip
 * to the store.
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

  /** `onLocalOnly`: told of each decision made on this process's count alone (a metric). */
  static async create(
    config: Config,
    database: Database,
    logger: Logger,
    onLocalOnly?: () => void,
  ): Promise<RateLimits> {
    const { burstPerSec, perMin, ipPerMin } = config.rateLimit;
    const store = await openLimiterStore(config, database, logger);
    await store.ready();
    const [burst, sustained, ip] = [
      { keyPrefix: 'rl_burst', points: burstPerSec, duration: 1 },
      { keyPrefix: 'rl_min', points: perMin, duration: 60 },
      { keyPrefix: 'rl_ip', points: ipPerMin, duration: 60 },
    ].map((spec) => store.leased(spec, onLocalOnly));
    return new RateLimits(store.kind, burst, sustained, ip, perMin, store.close);
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
