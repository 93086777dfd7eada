import type { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { isRetryable } from '../db/ambient.ts';
import type { Database } from '../db/database.ts';
import { isDatabaseUnavailable } from '../db/unavailable.ts';
import { storableText } from '../domain/attempts.ts';
import { isOperationalEvent } from '../domain/states.ts';
import { DELIVERY_STATUS } from '../domain/webhook-moves.ts';
import type { Clock } from '../lib/clock.ts';
import { newId } from '../lib/ids.ts';
import type { Mailer, PausedNotice } from '../notifications/mailer.ts';
import type { EventsService } from '../services/events-service.ts';
import { attemptOutcome, RetrySchedules } from './cascade.ts';
import type { SendResult } from './http-sender.ts';
import type { DeliveryQueue } from './queue.ts';
import { type FoldDeps, foldIntoSubscriptions } from './subscription-folds.ts';
import type {
  ClaimedDelivery,
  DeliveryFault,
  GivenBackClaim,
  SettledAttempt,
  WorkerEvents,
} from './types.ts';
import type { Wakes } from './wakes.ts';
import type { BatchRecorder, SettledBatch } from './worker-claims.ts';

/**
 * How the attempt log, the retry cascade and the counters read a broker's acknowledgement: as the
 * 2xx it stands for (docs/brokers.md: `status` is 200 when the broker acknowledged).
 */
const ACKNOWLEDGED_STATUS = 200;

/** A settlement that cannot be recorded is sent again after this, if no retry wait is set. */
const FAULT_RETRY_MS = 60_000;
/** Crash loops dead-lettered a sweep at most; the next sweep takes the rest. */
const CRASH_LOOPS_PER_SWEEP = 100;

/** What the recorder writes through; the worker's dependencies are these and more. */
export interface RecorderDeps extends FoldDeps {
  database: Database;
  queue: DeliveryQueue;
  /** Announces pauses and dead letters as operational events. */
  events: EventsService;
  webhook: Pick<Config['webhook'], 'retryScheduleMs' | 'autopauseFailures' | 'autopauseWindowMs'>;
  logger: Logger;
  /** When a faulted settlement is due again. */
  clock: Clock;
  /** Emails auto-pause notices when SMTP_URL is set. */
  mailer: Mailer | null;
}

/**
 * A failure of the database rather than of what was written: it cannot be reached or did not
 * answer in time, its lock was not granted, or it chose this transaction to abort (a deadlock, a
 * serialization failure). Tried again as it was, never taken for a row's fault.
 */
function isTransient(error: unknown): boolean {
  return isDatabaseUnavailable(error) || isRetryable(error);
}

/** Who hears of a recorded batch: the claim loop's wakes, and the worker's own listeners. */
export interface RecordedListeners {
  wakes: Pick<Wakes, 'at' | 'reopened'>;
  reports: Pick<EventEmitter<WorkerEvents>, 'emit'>;
}

/**
 * Turns finished attempts into outcomes (the retry cascade) and records the batches of
 * settlements a worker's claims hand it: the rows, the attempt log, the subscriptions' counters,
 * concurrency limits and holds, auto-pause with its notification rows, and claims given back, in
 * one transaction per batch. What a batch changes is then told: the retries it makes due wake the
 * claim loop, auto-pauses are emailed.
 */
export class Recorder implements BatchRecorder {
  private readonly mailing = new Set<Promise<void>>();
  private readonly schedules: RetrySchedules;

  constructor(
    private readonly deps: RecorderDeps,
    private readonly listeners: RecordedListeners,
  ) {
    this.schedules = new RetrySchedules(deps.webhook.retryScheduleMs);
  }

  /**
   * The outcome of a finished attempt (see attemptOutcome), logged and queued for recording.
   * `running`: the subscription's attempts running here once it began, itself included.
   */
  attempted(
    delivery: ClaimedDelivery,
    result: SendResult,
    timing: { startedAt: string; durationMs: number; endedAt: Date; running: number },
  ): SettledAttempt {
    // An answer counts only when it arrived whole: a 2xx whose body stalls past the time-out is a
    // time-out (null), like one that never answered. A broker's acknowledgement is the one place
    // a status is given that no HTTP answer carried: ACKNOWLEDGED_STATUS, as docs/brokers.md says.
    const answered = result.acknowledged ? ACKNOWLEDGED_STATUS : result.status;
    // An attempt its transformation cancelled succeeded without a send: the cascade and the
    // counters take it as delivered, and the attempt log says it was cancelled, with no status.
    const status = result.cancelled ? ACKNOWLEDGED_STATUS : result.error === null ? answered : null;
    const { outcome, holdUntil } = attemptOutcome(
      delivery,
      { status, retryAfter: result.retryAfter, errorClass: result.errorClass },
      this.schedules.of(delivery),
      timing.endedAt.getTime(),
    );
    const settled: SettledAttempt = {
      delivery,
      outcome,
      status,
      at: timing.endedAt.toISOString(),
      holdUntil,
      runningAtSend: timing.running,
      credentialsRefused: result.credentialsRefused === true,
      attempt: {
        startedAt: timing.startedAt,
        durationMs: timing.durationMs,
        status: answered,
        errorClass: result.errorClass,
        responseBody: storableText(result.body),
        retryAfter:
          result.retryAfter === undefined ? null : storableText(result.retryAfter.slice(0, 100)),
        concurrencyLimit: delivery.concurrencyLimit,
        cancelled: result.cancelled === true,
      },
    };
    // What an operator needs to explain a failure, one line per attempt (successes at debug).
    const line = {
      subscriptionId: delivery.subscriptionId,
      deliveryId: delivery.id,
      attempt: delivery.attempts,
      status,
      error: result.errorClass,
      ms: timing.durationMs,
      next: outcome.status,
      // When the next attempt is due (a retry), else null.
      nextAttemptAt: outcome.nextAttemptAt,
    };
    const { logger } = this.deps;
    // A dead letter is the end of a delivery: at warn, where alerts look.
    if (outcome.status === DELIVERY_STATUS.success) logger.debug(line, 'webhook attempt delivered');
    else if (outcome.status === DELIVERY_STATUS.deadLetter)
      logger.warn(line, 'webhook dead-lettered');
    else logger.info(line, 'webhook attempt failed');
    return settled;
  }

  /**
   * Records a batch in one transaction, then tells what it changed. When that fails for any
   * reason but the database's own (see isTransient), each settlement alone, so that one whose
   * recording throws (a fault of ours on that row) holds up no other: that one is given back, due
   * again after the first retry wait, and reported as a fault. Resolves with the deliveries left
   * unrecorded (the database failed, or refused even a give-back, so the rest is not tried); they
   * wait for the worker's next try.
   */
  async record(batch: SettledBatch): Promise<string[]> {
    const failure = await this.recordTogether(batch);
    if (failure === null) return [];
    const apart: SettledBatch[] = [
      ...batch.attempts.map((attempt) => ({ attempts: [attempt], givenBack: [] })),
      ...batch.givenBack.map((claim) => ({ attempts: [], givenBack: [claim] })),
    ];
    const ids = (from: number) =>
      apart.slice(from).map((rest) => [...rest.attempts, ...rest.givenBack][0].delivery.id);
    // The database's failure, not a row's: the whole batch waits for the next try.
    if (isTransient(failure)) return ids(0);
    for (const [i, one] of apart.entries()) {
      const error = apart.length === 1 ? failure : await this.recordTogether(one);
      if (error === null) continue;
      const [{ delivery }] = [...one.attempts, ...one.givenBack];
      if (!isTransient(error) && (await this.giveBackFaulted(delivery, error))) continue;
      return ids(i);
    }
    return [];
  }

  /** One transaction for `batch`, then its telling; the error when it was not committed. */
  private async recordTogether({ attempts, givenBack }: SettledBatch): Promise<unknown> {
    let paused: PausedNotice[];
    try {
      paused = await this.write(attempts, givenBack);
    } catch (error) {
      return error;
    }
    // Committed: a listener that throws must not have the batch recorded twice.
    try {
      this.recorded(attempts, givenBack, paused);
    } catch (error) {
      this.deps.logger.error({ err: error }, 'a recorded batch was not told whole');
    }
    return null;
  }

  /**
   * A settlement that cannot be recorded even alone: its claim given back, due after the first
   * retry wait (sent again, like an attempt cut off by a crash), and the fault reported. False
   * when the give-back failed too.
   */
  private async giveBackFaulted(delivery: ClaimedDelivery, error: unknown): Promise<boolean> {
    const { database, queue, clock } = this.deps;
    const wait = this.schedules.of(delivery)[0] ?? FAULT_RETRY_MS;
    const nextAttemptAt = new Date(clock.now().getTime() + wait).toISOString();
    try {
      await database.withTransaction(() =>
        queue.record({
          givenBack: [{ id: delivery.id, claimedAt: delivery.claimedAt, nextAttemptAt }],
          outcomes: [],
          attempts: [],
          subscriptionIds: [],
        }),
      );
    } catch {
      return false;
    }
    this.faulted(delivery.id, 'record', error, nextAttemptAt);
    this.listeners.wakes.at(Date.parse(nextAttemptAt));
    return true;
  }

  /** One delivery's own fault: logged with it, reported (the metrics count it). */
  private faulted(
    deliveryId: string,
    stage: DeliveryFault['stage'],
    error: unknown,
    next?: string,
  ) {
    this.deps.logger.error(
      { err: error, deliveryId, stage, nextAttemptAt: next ?? null },
      stage === 'record'
        ? 'recording a delivery failed on our side; it is sent again later'
        : 'dead-lettering a delivery failed on our side; the next sweep tries again',
    );
    this.listeners.reports.emit('fault', { deliveryId, stage });
  }

  private recorded(
    batch: readonly SettledAttempt[],
    givenBack: readonly GivenBackClaim[],
    paused: readonly PausedNotice[],
  ): void {
    const { wakes, reports } = this.listeners;
    reports.emit('recorded', [...batch]);
    // A recorded outcome of a `per_object` subscription lets the next of its object go.
    if (batch.some((s) => s.delivery.ordering === 'per_object')) wakes.reopened();
    for (const { outcome } of batch) {
      if (outcome.nextAttemptAt !== null) wakes.at(Date.parse(outcome.nextAttemptAt));
    }
    for (const { nextAttemptAt } of givenBack) wakes.at(Date.parse(nextAttemptAt));
    for (const notice of paused) {
      this.deps.logger.warn(
        {
          subscriptionId: notice.subscriptionId,
          tenantId: notice.tenantId,
          clientErrorRun: notice.clientErrorRun,
        },
        'webhook subscription auto-paused',
      );
      reports.emit('paused', notice);
      this.mail(notice);
    }
  }

  /** Resolves once the auto-pause emails under way are sent or have failed. */
  async close(): Promise<void> {
    await Promise.all(this.mailing);
  }

  /**
   * One transaction: claims given back, outcomes, the attempt log, and the subscriptions'
   * counters; returns the subscriptions it paused, whose notification rows it wrote. A test fire's
   * events change no counter, whatever their type (a test fire's documented promise); nor do
   * attempts that failed on our side.
   */
  private write(
    batch: readonly SettledAttempt[],
    givenBack: readonly GivenBackClaim[],
  ): Promise<PausedNotice[]> {
    // The endpoint's own request to wait, whatever was delivered (test fires too).
    const holds = new Map<string, string>();
    for (const { delivery, holdUntil } of batch) {
      const held = holds.get(delivery.subscriptionId);
      if (holdUntil !== null && (held === undefined || held < holdUntil)) {
        holds.set(delivery.subscriptionId, holdUntil);
      }
    }
    // Our own failures (`internal`) say nothing of the endpoint: no counter, no auto-pause.
    const counted = batch.filter((s) => !s.delivery.isTest && s.attempt.errorClass !== 'internal');
    const subscriptionIds = new Set([
      ...counted.map((s) => s.delivery.subscriptionId),
      ...holds.keys(),
    ]);
    return this.deps.database.withTransaction(async () => {
      const subscriptions = await this.deps.queue.record({
        givenBack: givenBack.map(({ delivery, nextAttemptAt }) => ({
          id: delivery.id,
          claimedAt: delivery.claimedAt,
          nextAttemptAt,
        })),
        outcomes: batch.map((s) => s.outcome),
        attempts: batch.map((s) => ({
          id: newId('att'),
          tenantId: s.delivery.tenantId,
          deliveryId: s.delivery.id,
          attempt: s.delivery.attempts,
          ...s.attempt,
        })),
        subscriptionIds: [...subscriptionIds],
      });
      await this.announceDeadLetters(
        batch.filter((s) => s.outcome.status === DELIVERY_STATUS.deadLetter).map((s) => s.delivery),
      );
      return foldIntoSubscriptions(this.deps, subscriptions, counted, holds);
    });
  }

  /**
   * Dead-letters the abandoned claims of a crash loop (see DeliveryQueue.crashLoops) and
   * announces each, one transaction a row: a row that cannot be dead-lettered or announced is
   * its own fault (reported, tried again at the next sweep), never the sweep's; a failure of the
   * database ends the sweep. How many were.
   */
  async deadLetterAbandoned(asker: string, aliveSince: string, staleBefore: string) {
    const { database, queue } = this.deps;
    const ids = await queue.crashLoops(asker, aliveSince, staleBefore, CRASH_LOOPS_PER_SWEEP);
    let lost = 0;
    for (const id of ids) {
      try {
        await database.withTransaction(async () => {
          const dead = await queue.deadLetterAbandoned(id, asker, aliveSince, staleBefore);
          if (dead === undefined) return;
          await this.announceDeadLetters([dead]);
          lost += 1;
        });
      } catch (error) {
        // The database's failure ends the sweep (the worker tries again at the next).
        if (isTransient(error)) throw error;
        this.faulted(id, 'crash_loop', error);
      }
    }
    return lost;
  }

  /**
   * `webhook.delivery.dead_lettered` for each delivery given up, to the tenant's other endpoints
   * (in the caller's transaction). A test fire's dead letter announces nothing, nor does an
   * operational event's own: announcements never cascade.
   */
  async announceDeadLetters(
    deliveries: ReadonlyArray<
      Pick<
        ClaimedDelivery,
        'id' | 'tenantId' | 'subscriptionId' | 'eventId' | 'eventType' | 'attempts' | 'isTest'
      >
    >,
  ): Promise<void> {
    for (const delivery of deliveries) {
      if (delivery.isTest || isOperationalEvent(delivery.eventType)) continue;
      await this.deps.events.emit(
        delivery.tenantId,
        'webhook.delivery.dead_lettered',
        {
          subscriptionId: delivery.subscriptionId,
          deliveryId: delivery.id,
          eventId: delivery.eventId,
          eventType: delivery.eventType,
          attempts: delivery.attempts,
        },
        { except: delivery.subscriptionId },
      );
    }
  }

  /**
   * Emails a pause notice once its notification rows are committed. A mail that fails is logged:
   * the notification rows (admin API) remain the record.
   */
  private mail(notice: PausedNotice): void {
    const { mailer, logger } = this.deps;
    if (mailer === null || notice.to.length === 0) return;
    const sending: Promise<void> = mailer
      .webhookPaused(notice)
      .catch((error) =>
        logger.warn(
          { err: error, subscriptionId: notice.subscriptionId },
          'auto-pause email not sent',
        ),
      )
      .finally(() => this.mailing.delete(sending));
    this.mailing.add(sending);
  }
}
