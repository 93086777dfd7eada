import type { AttemptErrorClass } from './attempts.ts';

/** Where a subscription's concurrency limit starts (new, or after a restart of the limit). */
export const INITIAL_CONCURRENCY = 4;
/** `maxConcurrency` when the subscription does not set it, and its bounds. */
export const DEFAULT_MAX_CONCURRENCY = 16;
export const MAX_CONCURRENCY = 64;
/** The highest cap on deliveries a second a subscription may set. */
export const MAX_PER_SECOND = 1000;

/**
 * Answers that say the endpoint has too much to do, which halve its concurrency limit (see
 * nextConcurrency): these statuses, and these failures, each with the words the reference uses.
 * Others (a 4xx, a 500, a TLS or DNS failure) say nothing of its load.
 */
export const PUSHBACK_STATUSES: readonly number[] = [429, 502, 503, 504];
export const PUSHBACK_FAILURES: Readonly<Partial<Record<AttemptErrorClass, string>>> = {
  timeout: 'a time-out',
  connection_refused: 'a refused connection',
  connection_reset: 'a reset connection',
  broker_busy: "a broker's back-pressure",
};

/** The adaptive concurrency limit's rule, as the reference states it. */
export const ADAPTIVE_LIMIT_RULE = `Starts at ${INITIAL_CONCURRENCY}; grows by 1 when the endpoint answers a 2xx in time with the whole limit in use, up to \`maxConcurrency\`; halves on a ${PUSHBACK_STATUSES.join(', ')}, ${Object.values(PUSHBACK_FAILURES).join(', ')}.`;

/*
 * Each rule below is written once, in TypeScript and, beside it, as the SQL expression the claim
 * uses (over the subscription alias `s`): change one, change the other.
 */

/** A subscription's concurrency limit in force: the adaptive limit, within its owner's ceiling. */
export function effectiveConcurrencyLimit(s: {
  concurrencyLimit: number;
  maxConcurrency: number;
}): number {
  return Math.min(s.concurrencyLimit, s.maxConcurrency);
}
export const EFFECTIVE_CONCURRENCY_LIMIT_SQL =
  'case when s.concurrency_limit < s.max_concurrency then s.concurrency_limit else s.max_concurrency end';

/**
 * A capped subscription is claimed for while its next free send slot is at most this far ahead,
 * so a worker holds at most about that long of its rows waiting.
 */
export const PACE_HORIZON_MS = 500;

/**
 * Rows one claim takes of a subscription capped at `maxPerSecond` whose send schedule is within
 * the pace horizon: the horizon's worth of its sends, rounded up (at least one).
 */
export const PACE_CLAIM_ROWS_SQL = `(s.max_per_second * ${PACE_HORIZON_MS} + 999) / 1000`;

/** `ordering` of a subscription: `per_object` sends one delivery per object at a time. */
export const ORDERINGS = ['none', 'per_object'] as const;
export type Ordering = (typeof ORDERINGS)[number];

/**
 * The object an event is about, for `per_object` ordering: the booking of booking, dispute and
 * payment events, the trip of trip events, the client of client events; null for others (a test
 * fire), which never wait for another.
 */
export function orderingKey(type: string, data: Readonly<Record<string, unknown>>): string | null {
  const [family] = type.split('.', 1);
  const member =
    family === 'booking' || family === 'dispute' || family === 'payment'
      ? 'bookingId'
      : family === 'trip'
        ? 'tripId'
        : family === 'client'
          ? 'clientId'
          : null;
  const value = member === null ? undefined : data[member];
  return typeof value === 'string' ? value : null;
}
