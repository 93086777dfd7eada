import { EventEmitter } from 'node:events';
import {
  context,
  type Link,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { DELIVERIES_CHANNEL, type Notifier } from '../db/notifier.ts';
import { deliveryRequest, deliveryUserAgent } from '../domain/delivery-request.ts';
import { MAX_CONCURRENCY } from '../domain/flow-control.ts';
import {
  subscriptionClaimShare,
  type TenantClaimPlan,
  tenantClaimPlan,
  tenantReopened,
  tenantWillReopen,
} from '../domain/worker-slots.ts';
import type { Clock } from '../lib/clock.ts';
import type { SecretBox } from '../lib/secret-box.ts';
import { ATTR, spanContextOf, traceparentOf, tracer, tracing } from '../lib/tracing.ts';
import type { Mailer, PausedNotice } from '../notifications/mailer.ts';
import type { DeliveryPacer } from '../rate-limit/delivery-pacer.ts';
import type { ClaimedDelivery } from '../repositories/webhooks-repository.ts';
import type {
  DeliveriesService,
  ReleasedClaim,
  SettledAttempt,
} from '../services/deliveries-service.ts';
import type { SendResult, WebhookSender } from './http-sender.ts';

export interface WorkerOptions {
  /** Attempts running at once, over every endpoint. */
  maxInFlight?: number;
  /**
   * Attempts this process runs at once to one subscription, whatever its concurrency limit (the
   * limit holds over every process; see claimDue). Also the least one tenant may hold: see
   * tenantSlotCap.
   */
  maxPerSubscription?: number;
  /** Most rows one claim takes. */
  batchSize?: number;
  /** Fallback polling when no signal arrives (other processes' retries, lost notifications). */
  pollIntervalMs?: number;
}

interface Dependencies {
  config: Config;
  deliveries: DeliveriesService;
  notifier: Notifier;
  secrets: SecretBox;
  sender: WebhookSender;
  /** Each subscription's maxPerSecond, over every worker process. */
  pacer: DeliveryPacer;
  clock: Clock;
  logger: Logger;
  /** Emails auto-pause notices when SMTP_URL is set. */
  mailer: Mailer | null;
}

/**
 * What a worker reports as it goes (tests await these instead of polling the database):
 * `claimed` a batch of rows, `attempted` one POST (its delivery and status, null for none),
 * `recorded` a batch of outcomes committed, `paused` a subscription auto-paused, `released` a
 * claim given back unattempted (its subscription's maxPerSecond was used up).
 */
export interface WorkerEvents {
  claimed: [deliveries: ClaimedDelivery[]];
  attempted: [attempt: SettledAttempt];
  released: [delivery: ClaimedDelivery];
  recorded: [batch: SettledAttempt[]];
  paused: [notice: PausedNotice];
}

export const DEFAULT_MAX_IN_FLIGHT = 256;
export const DEFAULT_MAX_PER_SUBSCRIPTION = MAX_CONCURRENCY;
/** Most rows one claim takes. */
export const DEFAULT_BATCH_SIZE = 200;

/** Flush settled attempts when this many wait, or after FLUSH_DELAY_MS. */
const FLUSH_BATCH = 200;
const FLUSH_DELAY_MS = 5;
const KEY_CACHE_LIMIT = 10_000;
/**
 * How long a claim for reopened slots waits for other subscriptions' slots to reopen too. The
 * subscription still has half its limit in flight, and a claim costs about the same for one
 * subscription as for several: without the wait, a drain to a few subscriptions claimed one
 * subscription's share at a time.
 */
const REOPEN_COALESCE_MS = 3;

/**
 * The delivery worker: claims due rows in batches, POSTs each signed body,
 * and records the outcomes in batches: one transaction per batch, with the subscriptions'
 * counters and auto-pause. Any number of workers may run against one database: claims are atomic
 * and every outcome is fenced by its claim, so a row reclaimed after a crash is never settled twice.
 */
export class DeliveryWorker extends EventEmitter<WorkerEvents> {
  private readonly maxInFlight: number;
  private readonly maxPerSubscription: number;
  /** Most rows one claim takes of a subscription (see claim). */
  private readonly claimPerSubscription: number;
  private readonly batchSize: number;
  private readonly pollIntervalMs: number;
  private readonly userAgent: string;

  private running = false;
  private loop: Promise<void> | null = null;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly perSubscription = new Map<string, number>();
  /**
   * Each subscription's concurrency limit as its latest claim here read it (within
   * maxPerSubscription), while it has attempts in flight here: what its levels are (see levels).
   */
  private readonly caps = new Map<string, number>();
  /** Deliveries whose attempt finished but is not recorded yet: their rows are still in flight. */
  private readonly unrecorded = new Set<string>();
  /** Subscriptions whose receiver asked to wait (Retry-After), until when (epoch ms). */
  private readonly holds = new Map<string, number>();
  private readonly perTenant = new Map<string, number>();
  private settled: SettledAttempt[] = [];
  private released: ReleasedClaim[] = [];
  private flushing: Promise<void> | null = null;
  private flushTimer: NodeJS.Timeout | null = null;
  /** Set by every signal; the loop claims again before it sleeps if one came meanwhile. */
  private signalled = true;
  private wake: (() => void) | null = null;
  private wakeTimer: NodeJS.Timeout | null = null;
  private wakeAt = Number.POSITIVE_INFINITY;
  /** A signal for reopened slots, held back REOPEN_COALESCE_MS (see slotsReopened). */
  private reopenTimer: NodeJS.Timeout | null = null;
  private readonly keys = new Map<string, string>();
  private readonly mailing = new Set<Promise<void>>();
  private lastStaleSweep = Number.NEGATIVE_INFINITY;
  private readonly onSignal = () => {
    this.signalled = true;
    this.wake?.();
  };

  constructor(
    private readonly deps: Dependencies,
    options: WorkerOptions = {},
  ) {
    super();
    this.maxInFlight = options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
    this.maxPerSubscription = options.maxPerSubscription ?? DEFAULT_MAX_PER_SUBSCRIPTION;
    this.claimPerSubscription = subscriptionClaimShare(this.maxPerSubscription);
    this.batchSize = options.batchSize ?? DEFAULT_BATCH_SIZE;
    this.pollIntervalMs = options.pollIntervalMs ?? 1_000;
    this.userAgent = deliveryUserAgent(deps.config.publicBaseUrl);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.deps.notifier.on(DELIVERIES_CHANNEL, this.onSignal);
    this.loop = this.run();
  }

  /**
   * Stops claiming, lets running attempts finish (each is bounded by WEBHOOK_TIMEOUT_MS) and
   * records them. Nothing claimed is left behind.
   */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.deps.notifier.off(DELIVERIES_CHANNEL, this.onSignal);
    if (this.wakeTimer) clearTimeout(this.wakeTimer);
    this.clearReopenTimer();
    this.wake?.();
    await this.loop;
    await Promise.all(this.inFlight);
    await this.flush();
    await Promise.all(this.mailing);
  }

  private async run(): Promise<void> {
    while (this.running) {
      if (this.inFlight.size >= this.maxInFlight) {
        await Promise.race(this.inFlight);
        continue;
      }
      // This claim takes what reopened slots a held-back signal would have claimed for.
      this.clearReopenTimer();
      this.signalled = false;
      const limit = Math.min(this.batchSize, this.maxInFlight - this.inFlight.size);
      let claimed: ClaimedDelivery[];
      let plan: TenantClaimPlan;
      try {
        ({ claimed, plan } = await this.claim(limit));
      } catch (error) {
        this.deps.logger.warn({ err: error }, 'claiming deliveries failed; retrying');
        await this.sleep(this.pollIntervalMs);
        continue;
      }
      if (claimed.length > 0) this.emit('claimed', claimed);
      for (const delivery of claimed) this.begin(delivery);
      if (!this.mayHaveMore(claimed, limit, plan) && !this.signalled) {
        await this.sleep(this.pollIntervalMs);
      }
    }
  }

  /**
   * A claim takes at most half of maxPerSubscription from each subscription, and within its
   * concurrency limit (counted over every process, see claimDue); none from one with more than
   * half its limit in flight here (its attempts signal as they end, see levels). Once per poll
   * interval, stale claims of rows on their last attempt are dead-lettered first
   * (never sent a seventh time).
   */
  private async claim(
    limit: number,
  ): Promise<{ claimed: ClaimedDelivery[]; plan: TenantClaimPlan }> {
    const { deliveries } = this.deps;
    const now = this.deps.clock.now().getTime();
    const staleBefore = deliveries.staleBefore(now);
    if (now - this.lastStaleSweep >= this.pollIntervalMs) {
      this.lastStaleSweep = now;
      const expired = await deliveries.deadLetterStale(staleBefore);
      if (expired > 0) {
        this.deps.logger.warn(
          { expired },
          'dead-lettered deliveries whose last attempt was cut off',
        );
      }
    }
    const skip = [...this.perSubscription]
      .filter(([id, count]) => count > this.levels(id).reopen)
      .map(([id]) => id);
    for (const [id, until] of this.holds) {
      if (until > now) skip.push(id);
      else this.holds.delete(id);
    }
    // The same one level up: one tenant's hung endpoints cannot hold another tenant's slots.
    const tenants = tenantClaimPlan(this.perTenant, this.maxInFlight, this.maxPerSubscription);
    const claimed = await deliveries.claim(now, staleBefore, limit, {
      perSubscription: this.claimPerSubscription,
      skip,
      tenantRoom: tenants.room,
      newcomerRoom: tenants.newcomerRoom,
      skipTenants: tenants.skip,
      settled: [...this.unrecorded],
    });
    return { claimed, plan: tenants };
  }

  /**
   * Whether a claim right after this one could find rows that no signal will announce: when this
   * one was cut short by its limit, or by a subscription's share per claim or a tenant's room and
   * left that subscription or tenant below the level whose crossing signals (attempts that ended
   * while the claim ran make that common). Otherwise it took every row claimable just now, and
   * the next claim waits for a signal (a new row, slots reopening, a retry falling due) or the
   * poll: claiming again at once came back empty after every batch of a drain, half of all claims.
   */
  private mayHaveMore(claimed: ClaimedDelivery[], limit: number, plan: TenantClaimPlan): boolean {
    if (claimed.length === 0) return false;
    if (claimed.length >= limit) return true;
    const bySubscription = new Map<string, number>();
    const byTenant = new Map<string, number>();
    for (const delivery of claimed) {
      const { subscriptionId, tenantId } = delivery;
      bySubscription.set(subscriptionId, (bySubscription.get(subscriptionId) ?? 0) + 1);
      byTenant.set(tenantId, (byTenant.get(tenantId) ?? 0) + 1);
    }
    for (const [id, count] of bySubscription) {
      const holding = this.perSubscription.get(id) ?? 0;
      const { share, reopen } = this.levels(id);
      if (count >= share && holding <= reopen) return true;
    }
    for (const [tenant, count] of byTenant) {
      const room = plan.room.get(tenant) ?? plan.newcomerRoom;
      const holding = this.perTenant.get(tenant) ?? 0;
      const others = this.perTenant.size - (holding > 0 ? 1 : 0);
      if (
        count >= room &&
        !tenantWillReopen(holding, others, this.maxInFlight, this.maxPerSubscription)
      ) {
        return true;
      }
    }
    return false;
  }

  /**
   * A subscription's levels, from its concurrency limit here: a claim takes up to half the limit
   * (`share`); one with more than `reopen` in flight is left out of claims, and falling back to
   * it signals the claim loop (held back, see slotsReopened); falling to `low` signals at once
   * (its pipe runs low).
   */
  private levels(id: string): { share: number; reopen: number; low: number } {
    const cap = this.caps.get(id) ?? this.maxPerSubscription;
    const share = subscriptionClaimShare(cap);
    const reopen = cap - share;
    return { share, reopen, low: Math.floor(reopen / 2) };
  }

  /**
   * Signals the claim loop REOPEN_COALESCE_MS from now, so that slots reopening meanwhile (other
   * subscriptions', as attempts end) are claimed for by one claim. New rows, due retries and a
   * subscription whose attempts in flight run low signal at once.
   */
  private slotsReopened(): void {
    this.reopenTimer ??= setTimeout(() => {
      this.reopenTimer = null;
      this.onSignal();
    }, REOPEN_COALESCE_MS);
  }

  private clearReopenTimer(): void {
    if (this.reopenTimer === null) return;
    clearTimeout(this.reopenTimer);
    this.reopenTimer = null;
  }

  /** Sleeps until a signal, a scheduled retry, `ms`, or stop. */
  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      const self = this;
      function done() {
        clearTimeout(timer);
        if (self.wake === done) self.wake = null;
        resolve();
      }
      this.wake = done;
      if (this.signalled || !this.running) done();
    });
  }

  private begin(delivery: ClaimedDelivery): void {
    const id = delivery.subscriptionId;
    const tenant = delivery.tenantId;
    const inFlight = (this.perSubscription.get(id) ?? 0) + 1;
    this.perSubscription.set(id, inFlight);
    this.caps.set(id, Math.min(this.maxPerSubscription, delivery.concurrencyLimit));
    this.perTenant.set(tenant, (this.perTenant.get(tenant) ?? 0) + 1);
    const attempt: Promise<void> = this.attempt(delivery, inFlight)
      .catch((error) => this.deps.logger.error({ err: error }, 'delivery attempt failed'))
      .finally(() => {
        this.inFlight.delete(attempt);
        const left = (this.perSubscription.get(id) ?? 1) - 1;
        const { reopen, low } = this.levels(id);
        if (left === 0) {
          this.perSubscription.delete(id);
          this.caps.delete(id);
        } else this.perSubscription.set(id, left);
        const tenantLeft = (this.perTenant.get(tenant) ?? 1) - 1;
        if (tenantLeft === 0) this.perTenant.delete(tenant);
        else this.perTenant.set(tenant, tenantLeft);
        const others = this.perTenant.size - (tenantLeft === 0 ? 0 : 1);
        if (tenantReopened(tenantLeft, others, this.maxInFlight, this.maxPerSubscription)) {
          this.slotsReopened();
        }
        // The subscription became claimable again: it may have rows waiting.
        // Down to its low level it is claimed for at once, unless a claim for reopened slots is
        // due within REOPEN_COALESCE_MS anyway: that one takes it too.
        if (left === low && this.reopenTimer === null) this.onSignal();
        else if (left === reopen) this.slotsReopened();
      });
    this.inFlight.add(attempt);
  }

  /**
   * One attempt, always settled: a failure on this side before or during the send (a signing key
   * that does not decrypt, a fault in the sender) is an attempt of class `internal` that follows
   * the retry cascade, never a delivery left in flight until its lease runs out. `inFlight`: the
   * subscription's attempts in flight here once this one began, itself included.
   */
  private async attempt(delivery: ClaimedDelivery, inFlight: number): Promise<void> {
    if (delivery.maxPerSecond !== null && (await this.paced(delivery, delivery.maxPerSecond))) {
      return;
    }
    const now = this.deps.clock.now();
    const startedAt = performance.now();
    const span = tracing.on ? processSpan(delivery) : null;
    let result: SendResult;
    try {
      result =
        span === null
          ? await this.send(delivery, now, null)
          : await context.with(trace.setSpan(ROOT_CONTEXT, span), () =>
              this.send(delivery, now, span),
            );
    } catch (error) {
      this.deps.logger.error(
        { err: error, subscriptionId: delivery.subscriptionId, deliveryId: delivery.id },
        'delivery attempt failed on our side',
      );
      result = { status: null, error: 'internal', errorClass: 'internal', body: '' };
    }
    if (span !== null) ended(span, result);
    this.settle(delivery, inFlight, result, now.toISOString(), performance.now() - startedAt);
  }

  /** `traced`: the attempt's process span; the POST then gets a client span of its own. */
  private send(delivery: ClaimedDelivery, now: Date, traced: Span | null): Promise<SendResult> {
    const event = {
      id: delivery.eventId,
      type: delivery.eventType,
      data: delivery.data,
      isTest: delivery.isTest,
      sequence: delivery.sequence,
    };
    const { body, headers } = deliveryRequest(
      event,
      Math.floor(now.getTime() / 1000),
      this.signingKeys(delivery, now),
      {
        requestId: `${delivery.id}.${delivery.attempts}`,
        attempt: delivery.attempts,
        userAgent: this.userAgent,
      },
      { standardWebhooks: delivery.standardWebhooks },
    );
    if (traced === null) return this.deps.sender.send(delivery.url, headers, body);
    return this.tracedSend(delivery, headers, body);
  }

  /** The POST in a client span, whose context goes along when the subscription asks. */
  private async tracedSend(
    delivery: ClaimedDelivery,
    headers: Record<string, string>,
    body: string,
  ): Promise<SendResult> {
    const span = clientSpan(delivery);
    if (delivery.propagateTraceContext) {
      const traceparent = traceparentOf(span);
      if (traceparent !== null) headers.traceparent = traceparent;
      const tracestate = span.spanContext().traceState?.serialize();
      if (tracestate) headers.tracestate = tracestate;
    }
    const result = await this.deps.sender.send(delivery.url, headers, body);
    ended(span, result);
    return result;
  }

  /** The current key, then the legacy one while its overlap lasts; decrypted once each. */
  private signingKeys(delivery: ClaimedDelivery, now: Date): string[] {
    const keys = [this.open(delivery.signingKey, delivery.subscriptionId)];
    const legacy = delivery.legacySigningKey;
    const until = delivery.legacySigningKeyExpiresAt;
    if (legacy !== null && until !== null && until > now.toISOString()) {
      keys.push(this.open(legacy, delivery.subscriptionId));
    }
    return keys;
  }

  private open(sealed: string, subscriptionId: string): string {
    let key = this.keys.get(sealed);
    if (key === undefined) {
      key = this.deps.secrets.decrypt(sealed, subscriptionId);
      if (this.keys.size >= KEY_CACHE_LIMIT) this.keys.clear();
      this.keys.set(sealed, key);
    }
    return key;
  }

  /**
   * Whether the subscription's maxPerSecond is used up for now: then the claim is given back. The
   * pacer falls back to counting in this process when its store fails; should it fail anyway, the
   * attempt goes (logged), rather than stay claimed until its lease runs out.
   */
  private async paced(delivery: ClaimedDelivery, perSecond: number): Promise<boolean> {
    let waitMs: number;
    try {
      waitMs = await this.deps.pacer.take(delivery.subscriptionId, perSecond);
    } catch (error) {
      this.deps.logger.error(
        { err: error, subscriptionId: delivery.subscriptionId },
        'maxPerSecond not counted',
      );
      return false;
    }
    if (waitMs > 0) this.release(delivery, waitMs);
    return waitMs > 0;
  }

  /**
   * Gives a claim back unattempted, due when the subscription's rate window reopens; the
   * subscription is left out of this worker's claims until then.
   */
  private release(delivery: ClaimedDelivery, waitMs: number): void {
    const until = new Date(this.deps.clock.now().getTime() + waitMs).toISOString();
    this.hold(delivery.subscriptionId, until);
    this.released.push({ delivery, nextAttemptAt: until });
    this.unrecorded.add(delivery.id);
    this.emit('released', delivery);
    this.flushSoon();
  }

  private hold(subscriptionId: string, until: string): void {
    const ms = Date.parse(until);
    if ((this.holds.get(subscriptionId) ?? 0) < ms) this.holds.set(subscriptionId, ms);
  }

  private settle(
    delivery: ClaimedDelivery,
    inFlight: number,
    result: SendResult,
    startedAt: string,
    ms: number,
  ): void {
    const now = this.deps.clock.now();
    // An answer counts only when it arrived whole: a 2xx whose body stalls past the time-out is a
    // time-out (null), like one that never answered.
    const status = result.error === null ? result.status : null;
    const { outcome, holdUntil } = this.deps.deliveries.outcome(
      delivery,
      status,
      now.getTime(),
      result.retryAfter,
      result.errorClass,
    );
    // Held here at once, before the outcome is recorded for other processes to see.
    if (holdUntil !== null) this.hold(delivery.subscriptionId, holdUntil);
    const settled: SettledAttempt = {
      delivery,
      outcome,
      status,
      at: now.toISOString(),
      holdUntil,
      inFlightAtSend: inFlight,
      attempt: {
        startedAt,
        durationMs: Math.round(ms),
        status: result.status,
        errorClass: result.errorClass,
        responseBody: result.body,
        retryAfter: result.retryAfter?.slice(0, 100) ?? null,
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
      ms: Math.round(ms),
      next: outcome.status,
      // When the next attempt is due (a retry), else null.
      nextAttemptAt: outcome.nextAttemptAt,
    };
    // A dead letter is the end of a delivery: at warn, where alerts look.
    if (outcome.status === 'success') this.deps.logger.debug(line, 'webhook attempt delivered');
    else if (outcome.status === 'dead_letter') this.deps.logger.warn(line, 'webhook dead-lettered');
    else this.deps.logger.info(line, 'webhook attempt failed');
    this.settled.push(settled);
    this.unrecorded.add(delivery.id);
    this.emit('attempted', settled);
    this.flushSoon();
  }

  private flushSoon(): void {
    if (this.settled.length >= FLUSH_BATCH) void this.flush();
    else this.flushTimer ??= setTimeout(() => void this.flush(), FLUSH_DELAY_MS);
  }

  /**
   * Records every settled attempt and released claim so far, in one transaction; one flush at a
   * time.
   */
  private async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.flushTimer) {
      clearTimeout(this.flushTimer);
      this.flushTimer = null;
    }
    const batch = this.settled;
    const released = this.released;
    if (batch.length === 0 && released.length === 0) return;
    this.settled = [];
    this.released = [];
    this.flushing = this.record(batch, released)
      .catch((error) => {
        // The claims stay in flight and are retried after the lease: nothing is lost.
        this.deps.logger.error({ err: error }, 'recording delivery outcomes failed');
      })
      .finally(() => {
        this.flushing = null;
        // Recorded, their rows no longer count in flight; not recorded, they count until their
        // claims go stale and are taken over.
        for (const { delivery } of [...batch, ...released]) this.unrecorded.delete(delivery.id);
      });
    await this.flushing;
    // A recorded outcome of a `per_object` subscription lets the next of its object go.
    if (batch.some((s) => s.delivery.ordering === 'per_object')) this.slotsReopened();
    this.scheduleRetries([
      ...batch.map((s) => s.outcome.nextAttemptAt),
      ...released.map((r) => r.nextAttemptAt),
    ]);
  }

  private async record(batch: SettledAttempt[], released: ReleasedClaim[]): Promise<void> {
    const paused = await this.deps.deliveries.record(batch, released);
    this.emit('recorded', batch);
    for (const notice of paused) {
      this.deps.logger.warn(
        {
          subscriptionId: notice.subscriptionId,
          tenantId: notice.tenantId,
          clientErrorRun: notice.clientErrorRun,
        },
        'webhook subscription auto-paused',
      );
      this.emit('paused', notice);
      this.mail(notice);
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

  /** Wakes this worker when the earliest of the batch's retries (ISO times or null) is due. */
  private scheduleRetries(due: ReadonlyArray<string | null>): void {
    let earliest = Number.POSITIVE_INFINITY;
    for (const at of due) {
      if (at !== null) earliest = Math.min(earliest, Date.parse(at));
    }
    if (!Number.isFinite(earliest) || !this.running || earliest >= this.wakeAt) return;
    const delay = Math.max(0, earliest - this.deps.clock.now().getTime());
    if (delay >= this.pollIntervalMs) return;
    if (this.wakeTimer) clearTimeout(this.wakeTimer);
    this.wakeAt = earliest;
    this.wakeTimer = setTimeout(() => {
      this.wakeTimer = null;
      this.wakeAt = Number.POSITIVE_INFINITY;
      this.onSignal();
    }, delay + 1);
    this.wakeTimer.unref();
  }
}

/**
 * An attempt's consumer span: a trace of its own (attempts of one event can span hours), linked to
 * the span that created the event when one was stored with it.
 */
function processSpan(delivery: ClaimedDelivery): Span {
  const producer = spanContextOf(delivery.traceContext);
  const links: Link[] = producer === null ? [] : [{ context: producer }];
  return tracer.startSpan(
    `process ${delivery.eventType}`,
    {
      kind: SpanKind.CONSUMER,
      root: true,
      links,
      attributes: {
        'messaging.system': 'tourops',
        'messaging.operation.type': 'process',
        'messaging.destination.name': delivery.eventType,
        'messaging.message.id': delivery.eventId,
        [ATTR.tenantId]: delivery.tenantId,
        [ATTR.subscriptionId]: delivery.subscriptionId,
        [ATTR.deliveryId]: delivery.id,
      },
    },
    ROOT_CONTEXT,
  );
}

/** The POST's client span (a child of the active process span); the URL without its query. */
function clientSpan(delivery: ClaimedDelivery): Span {
  const attributes: Record<string, string | number> = { 'http.request.method': 'POST' };
  try {
    const url = new URL(delivery.url);
    attributes['url.full'] = `${url.origin}${url.pathname}`;
    attributes['server.address'] = url.hostname;
    attributes['server.port'] = Number(url.port || 443);
  } catch {
    // The sender refuses it (an attempt of class internal); the span says what was tried.
  }
  if (delivery.attempts > 1) attributes['http.request.resend_count'] = delivery.attempts - 1;
  return tracer.startSpan('POST', { kind: SpanKind.CLIENT, attributes });
}

/** Ends a span with the attempt's outcome. */
function ended(span: Span, result: SendResult): void {
  if (result.status !== null) span.setAttribute('http.response.status_code', result.status);
  const failed = result.status === null || result.status >= 300;
  if (failed) {
    span.setAttribute('error.type', result.errorClass ?? String(result.status));
    span.setStatus({ code: SpanStatusCode.ERROR, message: result.error ?? undefined });
  }
  span.end();
}
