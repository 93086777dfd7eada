import type { EventEmitter } from 'node:events';
import type { Selectable } from 'kysely';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import type { WebhookSubscriptionsTable } from '../db/schema.ts';
import { storableText } from '../domain/attempts.ts';
import { isOperationalEvent } from '../domain/states.ts';
import { DELIVERY_STATUS, subscriptionMove } from '../domain/webhook-moves.ts';
import { newId } from '../lib/ids.ts';
import type { Mailer, PausedNotice } from '../notifications/mailer.ts';
import type { MembersRepository } from '../repositories/members-repository.ts';
import type { NotificationsRepository } from '../repositories/notifications-repository.ts';
import type { SubscriptionFold, WebhooksRepository } from '../repositories/webhooks-repository.ts';
import type { EventsService } from '../services/events-service.ts';
import { attemptOutcome, foldAttempts } from './cascade.ts';
import { type ConcurrencySample, foldConcurrency } from './concurrency.ts';
import type { SendResult } from './http-sender.ts';
import type { DeliveryQueue } from './queue.ts';
import type { ClaimedDelivery, GivenBackClaim, SettledAttempt, WorkerEvents } from './types.ts';
import type { Wakes } from './wakes.ts';
import type { BatchRecorder, SettledBatch } from './worker-claims.ts';

/**
 * How the attempt log, the retry cascade and the counters read a broker's acknowledgement: as the
 * 2xx it stands for (docs/brokers.md: `status` is 200 when the broker acknowledged).
 */
const ACKNOWLEDGED_STATUS = 200;

/** What the recorder writes through; the worker's dependencies are these and more. */
export interface RecorderDeps {
  database: Database;
  queue: DeliveryQueue;
  subscriptions: WebhooksRepository;
  members: MembersRepository;
  notifications: NotificationsRepository;
  /** Announces pauses and dead letters as operational events. */
  events: EventsService;
  webhook: Pick<Config['webhook'], 'retryScheduleMs' | 'autopauseFailures' | 'autopauseWindowMs'>;
  logger: Logger;
  /** Emails auto-pause notices when SMTP_URL is set. */
  mailer: Mailer | null;
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

  constructor(
    private readonly deps: RecorderDeps,
    private readonly listeners: RecordedListeners,
  ) {}

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
    const status = result.error === null ? answered : null;
    const { outcome, holdUntil } = attemptOutcome(
      delivery,
      { status, retryAfter: result.retryAfter, errorClass: result.errorClass },
      this.deps.webhook.retryScheduleMs,
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

  /** Records a batch in one transaction, then tells what it changed. */
  async record({ attempts: batch, givenBack }: SettledBatch): Promise<void> {
    const paused = await this.write(batch, givenBack);
    // Committed: a listener that throws must not have the batch recorded twice.
    try {
      this.recorded(batch, givenBack, paused);
    } catch (error) {
      this.deps.logger.error({ err: error }, 'a recorded batch was not told whole');
    }
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
      return this.updateSubscriptions(subscriptions, counted, holds);
    });
  }

  /**
   * Folds the batch into its subscriptions' counters and concurrency limits and sets their holds
   * (`heldUntil`, unless held longer already); `rows`: the subscriptions, locked.
   */
  private async updateSubscriptions(
    rows: readonly Selectable<WebhookSubscriptionsTable>[],
    batch: readonly SettledAttempt[],
    holds: ReadonlyMap<string, string>,
  ): Promise<PausedNotice[]> {
    const paused: PausedNotice[] = [];
    const folds: SubscriptionFold[] = [];
    const { subscriptions, members, notifications, webhook } = this.deps;
    const rule = { failures: webhook.autopauseFailures, windowMs: webhook.autopauseWindowMs };
    for (const row of rows) {
      const attempts = batch.filter((s) => s.delivery.subscriptionId === row.id);
      const hold = holds.get(row.id);
      const held =
        hold !== undefined && (row.heldUntil === null || row.heldUntil < hold)
          ? { heldUntil: hold }
          : {};
      if (attempts.length === 0) {
        // Only a test fire asked to wait: the hold alone, no counter.
        if ('heldUntil' in held) await subscriptions.updateSubscription(row.tenantId, row.id, held);
        continue;
      }
      const { counters, pause } = foldAttempts(
        row,
        attempts.map((s) => ({
          status: s.status,
          at: s.at,
          errorClass: s.attempt.errorClass,
          credentialsRefused: s.credentialsRefused,
        })),
        rule,
        row.active,
      );
      const concurrency = foldConcurrency(
        { limit: row.concurrencyLimit, backedOff: row.backedOff },
        attempts.map(concurrencySample),
        row.maxConcurrency,
      );
      if (!pause) {
        // The common case, every such subscription of the batch in one statement below.
        const { limit, backedOff } = concurrency;
        const heldUntil = held.heldUntil ?? null;
        folds.push({
          tenantId: row.tenantId,
          id: row.id,
          ...counters,
          heldUntil,
          concurrencyLimit: limit,
          backedOff: backedOff ? 1 : 0,
        });
        continue;
      }
      const now = attempts[attempts.length - 1].at;
      await subscriptions.updateSubscription(row.tenantId, row.id, {
        ...counters,
        ...held,
        concurrencyLimit: concurrency.limit,
        backedOff: concurrency.backedOff,
        ...subscriptionMove(pause === 'gone' ? 'gone' : 'autoPause', now),
      });
      // Told to the tenant's other endpoints, never to the one it is about.
      await this.deps.events.emit(
        row.tenantId,
        'webhook.endpoint.paused',
        { subscriptionId: row.id, url: row.url, reason: pause },
        { except: row.id },
      );
      const recipients = await members.ownersAndAdmins(row.tenantId);
      await notifications.insertMany(
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
        reason: pause,
        clientErrorRun: counters.clientErrorRun,
      });
    }
    await subscriptions.setFolds(folds);
    return paused;
  }

  /**
   * Dead-letters the abandoned claims of a crash loop (see
   * DeliveryQueue.deadLetterAbandoned) and announces them, in one transaction; how many.
   */
  deadLetterAbandoned(
    ...cutOff: Parameters<DeliveryQueue['deadLetterAbandoned']>
  ): Promise<number> {
    return this.deps.database.withTransaction(async () => {
      const lost = await this.deps.queue.deadLetterAbandoned(...cutOff);
      await this.announceDeadLetters(lost);
      return lost.length;
    });
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

/** What an attempt tells its subscription's concurrency limit (see nextConcurrency). */
function concurrencySample(settled: SettledAttempt): ConcurrencySample {
  return {
    limitAtSend: settled.attempt.concurrencyLimit,
    runningAtSend: settled.runningAtSend,
    status: settled.status,
    errorClass: settled.attempt.errorClass,
  };
}
