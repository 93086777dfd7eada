import type { DeliveryStatus, PauseReason } from './states.ts';

/**
 * The moves of webhook subscriptions and deliveries, as states.ts has them for trips, bookings and
 * payments: who makes each, from which states, and what it writes. The services, the portal
 * (through them) and the recorder write a subscription's state only through `subscriptionMove`;
 * every statement that changes a delivery's status names its move here.
 */

/** A subscription as its columns tell it: `active`, `paused` (why: its pauseReason), `deleted`. */
type SubscriptionState = 'active' | 'paused' | 'deleted';

const SUBSCRIPTION_MOVES = {
  /** Its owner: PATCH `active: false`, the portal's pause. */
  pause: { from: ['active'], to: 'paused', reason: 'manual' },
  /** The recorder: a run of refusals spanning the window (the auto-pause rule). */
  autoPause: { from: ['active'], to: 'paused', reason: 'consecutive_failures' },
  /** The recorder: the receiver answered 410 Gone. */
  gone: { from: ['active'], to: 'paused', reason: 'gone' },
  /** PATCH `active: true`, the admin and CLI enable, the portal's enable (and recover). */
  enable: { from: ['paused'], to: 'active', reason: null },
  /** DELETE, the portal's delete: kept for its history, 404 to every change after. */
  delete: { from: ['active', 'paused'], to: 'deleted', reason: 'deleted' },
} as const satisfies Record<
  string,
  { from: readonly SubscriptionState[]; to: SubscriptionState; reason: PauseReason | null }
>;
export type SubscriptionMove = keyof typeof SUBSCRIPTION_MOVES;

/** The columns of a subscription that its state is kept in, as a move writes them. */
export interface SubscriptionStateColumns {
  active: boolean;
  pausedAt: string | null;
  pauseReason: PauseReason | null;
  deletedAt?: string;
  /** An enable clears the failure counters: the auto-pause run starts afresh. */
  consecutiveFailures?: 0;
  clientErrorRun?: 0;
  clientErrorRunSince?: null;
}

function subscriptionState(row: { active: boolean; deletedAt: string | null }): SubscriptionState {
  if (row.deletedAt !== null) return 'deleted';
  return row.active ? 'active' : 'paused';
}

/** Whether `move` may be made from the subscription's state (else it changes nothing). */
export function mayMove(
  row: { active: boolean; deletedAt: string | null },
  move: SubscriptionMove,
): boolean {
  return (SUBSCRIPTION_MOVES[move].from as readonly SubscriptionState[]).includes(
    subscriptionState(row),
  );
}

/** What `move` writes, made at `at` (ISO 8601). */
export function subscriptionMove(move: SubscriptionMove, at: string): SubscriptionStateColumns {
  const { to, reason } = SUBSCRIPTION_MOVES[move];
  if (to === 'active') {
    return {
      active: true,
      pausedAt: null,
      pauseReason: null,
      consecutiveFailures: 0,
      clientErrorRun: 0,
      clientErrorRunSince: null,
    };
  }
  return {
    active: false,
    pausedAt: at,
    pauseReason: reason,
    ...(to === 'deleted' ? { deletedAt: at } : {}),
  };
}

/**
 * A delivery's moves. A new row is `pending` (an event emitted, a redelivery, a recovery); a row
 * not in flight may be copied into a new one (redeliver, recover), the original unchanged.
 */
export const DELIVERY_MOVES = {
  /** A worker claims a due row: its attempt counted. */
  claim: { from: 'pending', to: 'in_flight' },
  /** A worker takes over a claim whose worker died: the same attempt, sent again. */
  takeOver: { from: 'in_flight', to: 'in_flight' },
  /** A claim given back unattempted (its endpoint held, its send slot missed, a claim whose
   * answer was lost): its attempt uncounted. */
  giveBack: { from: 'in_flight', to: 'pending' },
  /** An attempt failed with retries left (or the receiver answered 410: due once enabled). */
  retry: { from: 'in_flight', to: 'pending' },
  /** A 2xx. */
  deliver: { from: 'in_flight', to: 'success' },
  /** The retry cascade used up, or a crash loop (`worker_lost`). */
  deadLetter: { from: 'in_flight', to: 'dead_letter' },
} as const satisfies Record<string, { from: DeliveryStatus; to: DeliveryStatus }>;

/**
 * The statuses by name, as the moves reach them: the engine and the repositories say
 * `DELIVERY_STATUS.inFlight` (in SQL through `sql.lit`), never the string (`npm run lint`).
 */
export const DELIVERY_STATUS = {
  pending: DELIVERY_MOVES.claim.from,
  inFlight: DELIVERY_MOVES.claim.to,
  success: DELIVERY_MOVES.deliver.to,
  deadLetter: DELIVERY_MOVES.deadLetter.to,
} as const;

/** Redeliver and recover copy any row that is not in flight. */
export function mayRedeliver(status: DeliveryStatus): boolean {
  return status !== DELIVERY_MOVES.claim.to;
}
