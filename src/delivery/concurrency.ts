import type { AttemptErrorClass } from '../domain/attempts.ts';
import { PUSHBACK_FAILURES, PUSHBACK_STATUSES } from '../domain/flow-control.ts';

/** A subscription's adaptive concurrency, as stored. */
export interface ConcurrencyState {
  /** Attempts in flight at once, 1 to the subscription's maxConcurrency. */
  limit: number;
  /** The last move was a cut the endpoint's answers asked for. */
  backedOff: boolean;
}

/** What one finished attempt tells the limit. */
export interface ConcurrencySample {
  /** The limit it was sent under. */
  limitAtSend: number;
  /** Attempts running to the subscription here once it was sent, itself included. */
  runningAtSend: number;
  /** The whole answer's status; null for none (a time-out, a connection error, a cut body). */
  status: number | null;
  errorClass: AttemptErrorClass | null;
}

/** An answer that says the endpoint has too much to do (see PUSHBACK_STATUSES). */
export function isPushback(status: number | null, errorClass: AttemptErrorClass | null): boolean {
  if (status !== null && PUSHBACK_STATUSES.includes(status)) return true;
  return errorClass !== null && Object.hasOwn(PUSHBACK_FAILURES, errorClass);
}

/**
 * Additive increase, multiplicative decrease. A push back halves the limit (at least 1); a 2xx
 * sent with the whole limit in use grows it by 1 (at most `max`). Evidence older than the limit
 * is ignored: a push back to an attempt sent under a higher limit than today's was answered by an
 * earlier cut already (a burst of 503s halves once, not down to 1), and a 2xx sent under another
 * limit than today's says nothing about today's. Anything else leaves the limit as it is.
 */
export function nextConcurrency(
  state: ConcurrencyState,
  sample: ConcurrencySample,
  max: number,
): ConcurrencyState {
  const limit = Math.min(state.limit, max);
  if (isPushback(sample.status, sample.errorClass)) {
    if (sample.limitAtSend > limit) return { limit, backedOff: state.backedOff };
    return { limit: Math.max(1, Math.floor(limit / 2)), backedOff: true };
  }
  const delivered = sample.status !== null && sample.status >= 200 && sample.status < 300;
  if (delivered && sample.limitAtSend === limit && sample.runningAtSend >= limit) {
    const grown = Math.min(max, limit + 1);
    return { limit: grown, backedOff: state.backedOff && grown < max };
  }
  return { limit, backedOff: state.backedOff };
}

/** The state after a batch of attempts, in the order they finished. */
export function foldConcurrency(
  state: ConcurrencyState,
  samples: readonly ConcurrencySample[],
  max: number,
): ConcurrencyState {
  let next = { limit: Math.min(state.limit, max), backedOff: state.backedOff };
  for (const sample of samples) next = nextConcurrency(next, sample, max);
  return next;
}
