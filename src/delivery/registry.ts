import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { Clock } from '../lib/clock.ts';
import { newId } from '../lib/ids.ts';
import type { DeliveryQueue } from './queue.ts';

/**
 * How many beats a worker makes within WEBHOOK_WORKER_DEAD_AFTER: a worker is taken for dead
 * only after several missed beats, so a busy event loop or a slow statement is not a death.
 */
const BEATS_PER_LIFE = 5;
/** The oldest heartbeat (ISO 8601) of a worker still alive at `nowMs`. */
function aliveSince(nowMs: number, workerDeadAfterMs: number): string {
  return new Date(nowMs - workerDeadAfterMs).toISOString();
}

/**
 * When a claim is abandoned at `nowMs` (ISO 8601): its worker's heartbeat is older than
 * `aliveSince`, or, made before the registry (no worker), it is older than `staleBefore` (the
 * attempt time-out plus WEBHOOK_LEASE_GRACE).
 */
export function abandonedBefore(
  nowMs: number,
  webhook: Pick<Config['webhook'], 'timeoutMs' | 'leaseGraceMs' | 'workerDeadAfterMs'>,
): { aliveSince: string; staleBefore: string } {
  return {
    aliveSince: aliveSince(nowMs, webhook.workerDeadAfterMs),
    staleBefore: new Date(nowMs - webhook.timeoutMs - webhook.leaseGraceMs).toISOString(),
  };
}

/** Rows of workers silent this long are deleted (their claims were taken over long ago). */
const FORGET_AFTER_MS = 3_600_000;

/**
 * This process's entry in the worker registry (webhook_workers): joined at start, BEATS_PER_LIFE
 * heartbeats within WEBHOOK_WORKER_DEAD_AFTER, removed at a clean stop. A delivery in flight names
 * its worker; once that worker's heartbeat is WEBHOOK_WORKER_DEAD_AFTER old, any worker takes the
 * delivery over, however recent the claim, and never before, however long the attempt runs.
 */
export class WorkerRegistry {
  readonly id = newId('wkr');
  /** Whether another worker beat within WEBHOOK_WORKER_DEAD_AFTER at the last count. */
  othersAlive = false;
  /** When this worker joined, and when it last counted the others (epoch ms). */
  private joinedAtMs = Number.POSITIVE_INFINITY;
  private countedAtMs = Number.NEGATIVE_INFINITY;
  private othersAtJoin = true;
  /** When this worker's heartbeat was last recorded (epoch ms); never, until it joined. */
  private beatAtMs = Number.NEGATIVE_INFINITY;
  private timer: NodeJS.Timeout | null = null;
  private beats = 0;
  private failing = false;

  constructor(
    private readonly deps: {
      queue: DeliveryQueue;
      clock: Clock;
      logger: Logger;
      config: { webhook: Pick<Config['webhook'], 'workerDeadAfterMs'> };
    },
  ) {}

  private get beatMs(): number {
    return this.deps.config.webhook.workerDeadAfterMs / BEATS_PER_LIFE;
  }

  /**
   * Whether this worker is the only one alive at `nowMs`, as far as it can know: its last count
   * found no other and was made within two beats (a worker that joins is counted by every other
   * within a beat; a count that late, its beat delayed, is not trusted).
   */
  aloneAt(nowMs: number): boolean {
    return !this.othersAlive && nowMs - this.countedAtMs <= 2 * this.beatMs;
  }

  /**
   * When this worker may first start an attempt of a capped subscription (epoch ms): a second
   * after it joined, so that no start of a worker before it (which may have started late, alone)
   * shares a second with its own; when others lived as it joined, also after each of them has
   * stopped taking itself for alone (see aloneAt).
   */
  get pacedFromMs(): number {
    return this.joinedAtMs + 1_000 + (this.othersAtJoin ? 2 * this.beatMs : 0);
  }

  /**
   * Whether this worker's heartbeat is late at `nowMs`: none recorded within half of
   * WEBHOOK_WORKER_DEAD_AFTER (two beats missed and more), so that its probe says so before
   * other workers take its claims over. True before it joined.
   */
  lateAt(nowMs: number): boolean {
    return nowMs - this.beatAtMs > this.deps.config.webhook.workerDeadAfterMs / 2;
  }

  async join(): Promise<void> {
    const now = this.deps.clock.now();
    await this.deps.queue.joinWorker(this.id, now.toISOString());
    this.beatAtMs = now.getTime();
    await this.countOthers(now.getTime());
    // Read after the count: a count of another worker that missed this one was made before it.
    this.joinedAtMs = this.deps.clock.now().getTime();
    this.othersAtJoin = this.othersAlive;
    this.timer = setInterval(() => void this.beat(), this.beatMs);
    this.timer.unref();
  }

  /** Leaves the registry: whatever this worker still held is taken over at once by others. */
  async leave(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    try {
      await this.deps.queue.forgetWorkers({ id: this.id });
    } catch (error) {
      // Its heartbeat stops either way: others take over after WEBHOOK_WORKER_DEAD_AFTER.
      this.deps.logger.warn({ err: error }, 'leaving the worker registry failed');
    }
  }

  /**
   * Reads whether other workers live: a worker that joins is known to the others within a beat.
   * `nowMs` is read before the statement: a count that missed a worker was made before it joined.
   */
  private async countOthers(nowMs: number): Promise<void> {
    const since = aliveSince(nowMs, this.deps.config.webhook.workerDeadAfterMs);
    this.othersAlive = (await this.deps.queue.otherLiveWorkers(this.id, since)) > 0;
    this.countedAtMs = nowMs;
  }

  private async beat(): Promise<void> {
    const { queue, clock, logger } = this.deps;
    const now = clock.now();
    try {
      // Taken for dead (silent too long) and removed: this worker lives, so it joins again.
      if (!(await queue.heartbeat(this.id, now.toISOString()))) {
        await queue.joinWorker(this.id, now.toISOString());
      }
      this.beatAtMs = Math.max(this.beatAtMs, now.getTime());
      await this.countOthers(now.getTime());
      this.beats += 1;
      if (this.beats % 900 === 1) {
        await queue.forgetWorkers({
          before: new Date(now.getTime() - FORGET_AFTER_MS).toISOString(),
        });
      }
      if (this.failing) logger.info('worker heartbeat recorded again');
      this.failing = false;
    } catch (error) {
      if (!this.failing) logger.warn({ err: error }, 'worker heartbeat failed; retrying');
      this.failing = true;
    }
  }
}
