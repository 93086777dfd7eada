import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import type { AttemptErrorClass } from '../domain/attempts.ts';
import {
  endpointHoldMs,
  foldAttempts,
  nextStep,
  parseRetryAfter,
} from '../domain/delivery-policy.ts';
import { type ConcurrencySample, foldConcurrency } from '../domain/flow-control.ts';
import type { Clock } from '../lib/clock.ts';
import { newId } from '../lib/ids.ts';
import type { QueueStats } from '../lib/metrics.ts';
import type { PausedNotice } from '../notifications/mailer.ts';
import type { MembersRepository } from '../repositories/members-repository.ts';
import type { NotificationsRepository } from '../repositories/notifications-repository.ts';
import type {
  ClaimedDelivery,
  ClaimOptions,
  DeliveryOutcome,
  WebhooksRepository,
} from '../repositories/webhooks-repository.ts';

interface DeliveriesServiceDeps {
  database: Database;
  webhooks: WebhooksRepository;
  members: MembersRepository;
  notifications: NotificationsRepository;
  clock: Clock;
  webhook: Pick<
    Config['webhook'],
    'retryScheduleMs' | 'autopauseFailures' | 'autopauseWindowMs' | 'timeoutMs' | 'leaseGraceMs'
  >;
}

/** One finished attempt, waiting to be recorded. */
export interface SettledAttempt {
  delivery: ClaimedDelivery;
  outcome: DeliveryOutcome;
  /** The HTTP status, or null for a time-out or a connection failure. */
  status: number | null;
  /** When it finished (ISO 8601). */
  at: string;
  /** Until when the answer's Retry-After holds every delivery to the endpoint, if it asks. */
  holdUntil: string | null;
  /** Attempts in flight to the subscription in this process once it was sent, itself included. */
  inFlightAtSend: number;
  /** What the attempt log keeps of it. */
  attempt: {
    startedAt: string;
    durationMs: number;
    /** The status as answered, even when the answer was then cut off. */
    status: number | null;
    errorClass: AttemptErrorClass | null;
    responseBody: string;
    retryAfter: string | null;
    /** The subscription's concurrency limit it was sent under. */
    concurrencyLimit: number;
  };
}

/** A claim given back unattempted (its subscription's rate cap), due again at `nextAttemptAt`. */
export interface ReleasedClaim {
  delivery: ClaimedDelivery;
  nextAttemptAt: string;
}

/**
 * The delivery worker's reads and writes: claims, the outcome of an attempt, and recording a batch
 * of outcomes with the subscriptions' counters and auto-pause in one transaction.
 */
export class DeliveriesService {
  /** Attempts in all: one more than the waits of the schedule. */
  readonly maxAttempts: number;

  constructor(private readonly deps: DeliveriesServiceDeps) {
    this.maxAttempts = deps.webhook.retryScheduleMs.length + 1;
  }

  /**
   * A claim older than the attempt time-out plus the lease grace belongs to a worker that died:
   * others take it over.
   */
  staleBefore(nowMs: number): string {
    const { timeoutMs, leaseGraceMs } = this.deps.webhook;
    return new Date(nowMs - timeoutMs - leaseGraceMs).toISOString();
  }

  /** The queue as the metrics show it. */
  async queueStats(): Promise<QueueStats> {
    const now = this.deps.clock.now();
    const stats = await this.deps.webhooks.queueStats(
      now.toISOString(),
      this.staleBefore(now.getTime()),
    );
    return {
      pending: stats.pending,
      stuck: stats.stuck,
      oldestDueAgeSeconds:
        stats.oldestDue === null
          ? 0
          : Math.max(0, (now.getTime() - Date.parse(stats.oldestDue)) / 1000),
      pausedSubscriptions: stats.paused,
    };
  }

  /** Dead-letters stale claims of rows whose interrupted attempt was their last. */
  deadLetterStale(staleBefore: string): Promise<number> {
    return this.deps.webhooks.deadLetterStale(staleBefore, this.maxAttempts);
  }

  claim(
    nowMs: number,
    staleBefore: string,
    limit: number,
    options: Omit<ClaimOptions, 'maxAttempts'>,
  ): Promise<ClaimedDelivery[]> {
    return this.deps.webhooks.claimDue(new Date(nowMs).toISOString(), staleBefore, limit, {
      ...options,
      maxAttempts: this.maxAttempts,
    });
  }

  /**
   * What an attempt that ended with `status` does to its delivery row (see nextStep), and until
   * when it holds every delivery to the endpoint (see endpointHoldMs), or null; `retryAfter` is
   * the receiver's header on a 429 or 503.
   */
  outcome(
    delivery: ClaimedDelivery,
    status: number | null,
    nowMs: number,
    retryAfter?: string,
    errorClass: AttemptErrorClass | null = null,
  ): { outcome: DeliveryOutcome; holdUntil: string | null } {
    const retryAfterMs = parseRetryAfter(retryAfter, nowMs);
    const step = nextStep(
      delivery.attempts,
      status,
      this.deps.webhook.retryScheduleMs,
      nowMs,
      retryAfterMs,
    );
    const holdMs = endpointHoldMs(status, retryAfterMs);
    return {
      outcome: {
        id: delivery.id,
        claimedAt: delivery.claimedAt,
        status: step.status,
        lastResponseStatus: status,
        lastError: step.status === 'success' ? null : errorClass,
        nextAttemptAt: step.nextAttemptAt,
        deliveredAt: step.deliveredAt,
      },
      holdUntil: holdMs === null ? null : new Date(nowMs + holdMs).toISOString(),
    };
  }

  /**
   * Records a batch of attempts and folds them into their subscriptions' counters, and gives
   * back the claims `released` unattempted, in one transaction; returns the subscriptions it
   * paused, whose notification rows it wrote. A test fire's events change no counter, whatever
   * their type: it leaves the subscription as it was (a test fire's documented promise); nor do
   * attempts that failed on our side.
   */
  record(
    batch: readonly SettledAttempt[],
    released: readonly ReleasedClaim[] = [],
  ): Promise<PausedNotice[]> {
    return this.deps.database.withTransaction(async () => {
      await this.deps.webhooks.releaseClaims(
        released.map(({ delivery, nextAttemptAt }) => ({
          id: delivery.id,
          claimedAt: delivery.claimedAt,
          nextAttemptAt,
        })),
      );
      await this.deps.webhooks.recordOutcomes(batch.map((s) => s.outcome));
      await this.deps.webhooks.insertAttempts(
        batch.map((s) => ({
          id: newId('att'),
          tenantId: s.delivery.tenantId,
          deliveryId: s.delivery.id,
          attempt: s.delivery.attempts,
          ...s.attempt,
        })),
      );
      // The endpoint's own request to wait, whatever was delivered (test fires too).
      const holds = new Map<string, string>();
      for (const { delivery, holdUntil } of batch) {
        const held = holds.get(delivery.subscriptionId);
        if (holdUntil !== null && (held === undefined || held < holdUntil)) {
          holds.set(delivery.subscriptionId, holdUntil);
        }
      }
      // Our own failures (`internal`) say nothing of the endpoint: no counter, no auto-pause.
      return this.updateSubscriptions(
        batch.filter((s) => !s.delivery.isTest && s.attempt.errorClass !== 'internal'),
        holds,
      );
    });
  }

  /**
   * Folds the batch into its subscriptions' counters and concurrency limits and sets their holds
   * (`heldUntil`, unless held longer already), every row locked first in id order so two workers
   * cannot deadlock.
   */
  private async updateSubscriptions(
    batch: readonly SettledAttempt[],
    holds: ReadonlyMap<string, string>,
  ): Promise<PausedNotice[]> {
    const paused: PausedNotice[] = [];
    if (batch.length === 0 && holds.size === 0) return paused;
    const rule = {
      failures: this.deps.webhook.autopauseFailures,
      windowMs: this.deps.webhook.autopauseWindowMs,
    };
    const ids = [...new Set([...batch.map((s) => s.delivery.subscriptionId), ...holds.keys()])];
    const rows = await this.deps.webhooks.lockSubscriptions(ids);
    for (const row of rows) {
      const attempts = batch.filter((s) => s.delivery.subscriptionId === row.id);
      const hold = holds.get(row.id);
      const held =
        hold !== undefined && (row.heldUntil === null || row.heldUntil < hold)
          ? { heldUntil: hold }
          : {};
      if (attempts.length === 0) {
        // Only a test fire asked to wait: the hold alone, no counter.
        if ('heldUntil' in held) {
          await this.deps.webhooks.updateSubscription(row.tenantId, row.id, held);
        }
        continue;
      }
      const { counters, pause } = foldAttempts(row, attempts, rule, row.active);
      const concurrency = foldConcurrency(
        { limit: row.concurrencyLimit, backedOff: row.backedOff },
        attempts.map(concurrencySample),
        row.maxConcurrency,
      );
      const now = this.deps.clock.now().toISOString();
      await this.deps.webhooks.updateSubscription(row.tenantId, row.id, {
        ...counters,
        ...held,
        concurrencyLimit: concurrency.limit,
        backedOff: concurrency.backedOff,
        ...(pause ? { active: false, pausedAt: now } : {}),
      });
      if (!pause) continue;
      const recipients = await this.deps.members.ownersAndAdmins(row.tenantId);
      await this.deps.notifications.insertMany(
        recipients.map((member) => ({
          id: newId('ntf'),
          tenantId: row.tenantId,
          memberId: member.id,
          recipient: member.email,
          kind: 'webhook_paused',
          subscriptionId: row.id,
          createdAt: now,
        })),
      );
      paused.push({
        to: recipients.map((member) => member.email),
        tenantId: row.tenantId,
        subscriptionId: row.id,
        url: row.url,
        pausedAt: now,
        clientErrorRun: counters.clientErrorRun,
      });
    }
    return paused;
  }
}

/** What an attempt tells its subscription's concurrency limit (see nextConcurrency). */
function concurrencySample(settled: SettledAttempt): ConcurrencySample {
  return {
    limitAtSend: settled.attempt.concurrencyLimit,
    inFlightAtSend: settled.inFlightAtSend,
    status: settled.status,
    errorClass: settled.attempt.errorClass,
  };
}
