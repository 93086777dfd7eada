import type { AttemptErrorClass } from '../domain/attempts.ts';
import { retryScheduleMs } from '../domain/retry-schedule.ts';
import { TRANSFORMATION_FAILED } from '../domain/transformation.ts';
import { DELIVERY_STATUS } from '../domain/webhook-moves.ts';
import { BoundedMap } from '../lib/bounded-map.ts';
import { parseStoredJson } from '../lib/json.ts';
import type { ClaimedDelivery, DeliveryOutcome } from './types.ts';

/**
 * The retry cascade, as pure functions: what becomes of a delivery after an attempt, how long the
 * receiver's answer holds its endpoint, and how a run of attempts changes its subscription's
 * counters and whether it pauses. The recorder applies them; the tests call them directly.
 */

/** Where a delivery goes after an attempt. */
export type NextStep =
  | { status: typeof DELIVERY_STATUS.success; deliveredAt: string; nextAttemptAt: null }
  | { status: typeof DELIVERY_STATUS.deadLetter; deliveredAt: null; nextAttemptAt: null }
  | { status: typeof DELIVERY_STATUS.pending; deliveredAt: null; nextAttemptAt: string };

/** A whole 2xx answer; null is a time-out or a connection that gave none. */
function isDelivered(status: number | null): boolean {
  return status !== null && status >= 200 && status < 300;
}

/** Longest a receiver's `Retry-After` may hold its endpoint's deliveries back. */
export const MAX_RETRY_AFTER_MS = 3_600_000;

/**
 * A `Retry-After` value (delay in seconds, or an HTTP date) as milliseconds from `nowMs`; null
 * when it is neither. A date in the past is 0.
 */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | null {
  if (value === undefined) return null;
  const text = value.trim();
  if (/^\d{1,10}$/.test(text)) return Number(text) * 1000;
  // HTTP dates name their day and month in letters; anything else (a bare number, "1e3") is not one.
  if (!/^[A-Za-z]{3},? /.test(text)) return null;
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - nowMs);
}

/**
 * How long a 429 or 503 answer with a valid `Retry-After` (`retryAfterMs`) holds every delivery
 * to its endpoint, at most MAX_RETRY_AFTER_MS; null when the answer asks for nothing.
 */
export function endpointHoldMs(status: number | null, retryAfterMs: number | null): number | null {
  if ((status !== 429 && status !== 503) || retryAfterMs === null) return null;
  return Math.min(retryAfterMs, MAX_RETRY_AFTER_MS);
}

/**
 * After attempt number `attempt` (1 for the first) ended with `status`: delivered on a 2xx; else
 * retried after `scheduleMs[attempt - 1]`, or dead-lettered once the schedule is used up
 * (attempts in all = waits + 1). A 429 or 503 with `Retry-After` (`retryAfterMs`) retries at the
 * later of the scheduled wait and that, the latter capped at an hour (see endpointHoldMs).
 */
export function nextStep(
  attempt: number,
  status: number | null,
  scheduleMs: readonly number[],
  nowMs: number,
  retryAfterMs: number | null = null,
): NextStep {
  if (isDelivered(status)) {
    return {
      status: DELIVERY_STATUS.success,
      deliveredAt: new Date(nowMs).toISOString(),
      nextAttemptAt: null,
    };
  }
  if (attempt > scheduleMs.length) {
    return { status: DELIVERY_STATUS.deadLetter, deliveredAt: null, nextAttemptAt: null };
  }
  const scheduled = scheduleMs[Math.max(0, attempt - 1)];
  const held = endpointHoldMs(status, retryAfterMs);
  const wait = held === null ? scheduled : Math.max(scheduled, held);
  return {
    status: DELIVERY_STATUS.pending,
    deliveredAt: null,
    nextAttemptAt: new Date(nowMs + wait).toISOString(),
  };
}

/**
 * The waits between a delivery's attempts: its subscription's own (`retrySchedule`, parsed once
 * per schedule written: there are few, each seen again and again), or the deployment's.
 */
export class RetrySchedules {
  private readonly parsed = new BoundedMap<string, number[]>(1000);

  constructor(private readonly deployment: readonly number[]) {}

  of(delivery: Pick<ClaimedDelivery, 'retrySchedule'>): readonly number[] {
    const written = delivery.retrySchedule;
    if (written === null) return this.deployment;
    return (
      this.parsed.get(written) ??
      this.parsed.remember(written, retryScheduleMs(parseStoredJson<string[]>(written)))
    );
  }
}

/** A subscription's health counters, as stored. */
export interface SubscriptionCounters {
  /** Every failed attempt since the last success. */
  consecutiveFailures: number;
  /** Consecutive 4xx answers, and when that run began (the auto-pause rule). */
  clientErrorRun: number;
  clientErrorRunSince: string | null;
  lastSuccessAt: string | null;
  lastFailureAt: string | null;
}

/** One finished attempt as the fold sees it. */
export interface AttemptSummary {
  status: number | null;
  /** When it finished (ISO 8601). */
  at: string;
  errorClass?: AttemptErrorClass | null;
  /** An OAuth2 token server refused the subscription's credentials (see SendResult). */
  credentialsRefused?: boolean;
}

/**
 * The receiver refusing what we send, which only its owner can mend: a 4xx answer, its token
 * server refusing the credentials, its transformation failing, or a broker's `broker_refused`
 * (refused credentials or permissions, an unknown exchange, virtual host or stream, an
 * unroutable message, a nack). The run of these is what auto-pause counts. A token server that cannot be reached breaks it, as a 5xx.
 */
function isRefusal(attempt: AttemptSummary): boolean {
  if (attempt.credentialsRefused === true) return true;
  if (attempt.errorClass === TRANSFORMATION_FAILED) return true;
  if (attempt.status !== null) return attempt.status >= 400 && attempt.status < 500;
  return attempt.errorClass === 'broker_refused';
}

export interface PauseRule {
  /** WEBHOOK_AUTOPAUSE_FAILURES: consecutive 4xx answers… */
  failures: number;
  /** …spanning at least WEBHOOK_AUTOPAUSE_WINDOW. */
  windowMs: number;
}

/** The receiver's "stop sending" (Standard Webhooks): its subscription pauses at once. */
const GONE = 410;

/**
 * Folds attempts, in the order they finished, into the counters. consecutiveFailures counts every
 * failed attempt and resets on a 2xx; the 4xx run counts consecutive refusals (see isRefusal) and
 * is broken by a 2xx, a 5xx, a time-out or a broker's back pressure. An active subscription
 * pauses: `gone` at a 410 answer, else `consecutive_failures` when the run is at least
 * `rule.failures` long and spans at least `rule.windowMs`; null when it does not pause.
 */
export function foldAttempts(
  start: SubscriptionCounters,
  attempts: readonly AttemptSummary[],
  rule: PauseRule,
  active: boolean,
): { counters: SubscriptionCounters; pause: 'gone' | 'consecutive_failures' | null } {
  // Only the counters: `start` may be a whole subscription row.
  const c: SubscriptionCounters = {
    consecutiveFailures: start.consecutiveFailures,
    clientErrorRun: start.clientErrorRun,
    clientErrorRunSince: start.clientErrorRunSince,
    lastSuccessAt: start.lastSuccessAt,
    lastFailureAt: start.lastFailureAt,
  };
  for (const attempt of attempts) {
    if (isDelivered(attempt.status)) {
      c.consecutiveFailures = 0;
      c.clientErrorRun = 0;
      c.clientErrorRunSince = null;
      c.lastSuccessAt = attempt.at;
      continue;
    }
    c.consecutiveFailures += 1;
    c.lastFailureAt = attempt.at;
    if (isRefusal(attempt)) {
      c.clientErrorRun += 1;
      c.clientErrorRunSince ??= attempt.at;
    } else {
      c.clientErrorRun = 0;
      c.clientErrorRunSince = null;
    }
  }
  const since = c.clientErrorRunSince;
  const failing =
    since !== null &&
    c.clientErrorRun >= rule.failures &&
    Date.parse(c.lastFailureAt ?? since) - Date.parse(since) >= rule.windowMs;
  if (!active) return { counters: c, pause: null };
  if (attempts.some((attempt) => attempt.status === GONE)) return { counters: c, pause: 'gone' };
  return { counters: c, pause: failing ? 'consecutive_failures' : null };
}

/**
 * What an attempt that ended with `status` (null: no whole answer) does to its delivery row (see
 * nextStep), and until when it holds every delivery to the endpoint (see endpointHoldMs), or null;
 * `retryAfter` is the receiver's header on a 429 or 503. A 410 pauses the subscription (see
 * foldAttempts), so its delivery stays pending, due again as soon as it is enabled; a test
 * fire's changes nothing of the subscription and goes through the cascade like any answer.
 */
export function attemptOutcome(
  delivery: Pick<ClaimedDelivery, 'id' | 'claimedAt' | 'attempts' | 'isTest'>,
  answer: { status: number | null; retryAfter?: string; errorClass: AttemptErrorClass | null },
  scheduleMs: readonly number[],
  nowMs: number,
): { outcome: DeliveryOutcome; holdUntil: string | null } {
  const retryAfterMs = parseRetryAfter(answer.retryAfter, nowMs);
  const step: NextStep =
    answer.status === GONE && !delivery.isTest
      ? {
          status: DELIVERY_STATUS.pending,
          deliveredAt: null,
          nextAttemptAt: new Date(nowMs).toISOString(),
        }
      : nextStep(delivery.attempts, answer.status, scheduleMs, nowMs, retryAfterMs);
  const holdMs = endpointHoldMs(answer.status, retryAfterMs);
  return {
    outcome: {
      id: delivery.id,
      claimedAt: delivery.claimedAt,
      status: step.status,
      attempts: delivery.attempts,
      lastResponseStatus: answer.status,
      lastError: step.status === DELIVERY_STATUS.success ? null : answer.errorClass,
      nextAttemptAt: step.nextAttemptAt,
      deliveredAt: step.deliveredAt,
    },
    holdUntil: holdMs === null ? null : new Date(nowMs + holdMs).toISOString(),
  };
}
