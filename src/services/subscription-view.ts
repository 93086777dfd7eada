import { effectiveConcurrencyLimit, type Ordering } from '../domain/flow-control.ts';
import type { PayloadFilter } from '../domain/payload-filter.ts';
import {
  NO_RECEIVER_SECRETS,
  type ReceiverAuthShown,
  shownReceiverAuth,
} from '../domain/receiver-auth.ts';
import type { PauseReason, SubscribableEventType } from '../domain/states.ts';
import type { PayloadForm } from '../domain/thin-payload.ts';
import type { Transformation } from '../domain/transformation.ts';
import { parseStoredJson } from '../lib/json.ts';
import type { SubscriptionRow } from '../repositories/webhooks-repository.ts';

/** How the API shows a subscription: its settings, its masked secrets and its deliveries' state. */

/** A subscription as the API shows it; the signing key is never part of it. */
export interface Subscription {
  id: string;
  url: string;
  events: SubscribableEventType[];
  active: boolean;
  pausedAt: string | null;
  pauseReason: PauseReason | null;
  consecutiveFailures: number;
  lastSuccessAt: string | null;
  lastFailureAt: string | null;
  last24h: RecentDeliveries;
  standardWebhooks: boolean;
  asymmetricSignatures: boolean;
  publicKey: string | null;
  maxConcurrency: number;
  maxPerSecond: number | null;
  ordering: Ordering;
  propagateTraceContext: boolean;
  filter: PayloadFilter | null;
  payload: PayloadForm;
  transformation: Transformation | null;
  retrySchedule: string[] | null;
  headers: ReceiverAuthShown['headers'];
  auth: ReceiverAuthShown['auth'];
  clientCertificate: ReceiverAuthShown['clientCertificate'];
  deliveryState: DeliveryState;
  createdAt: string;
}

/**
 * How fast deliveries flow to the endpoint now, and what holds them back: `reason` `paused` (or
 * `deleted`), `retry_after` (the endpoint asked to wait, until `pausedUntil`), `backpressure` (its
 * answers cut the concurrency limit, which grows back as it answers in time), or null.
 */
interface DeliveryState {
  concurrencyLimit: number;
  inFlight: number;
  pausedUntil: string | null;
  reason: 'paused' | 'deleted' | 'retry_after' | 'backpressure' | null;
}

/** What happened to a subscription's deliveries created in the last 24 hours. */
export interface RecentDeliveries {
  succeeded: number;
  deadLettered: number;
  /** Waiting for an attempt or a retry, or being attempted now. */
  pending: number;
}

export const NO_DELIVERIES: RecentDeliveries = { succeeded: 0, deadLettered: 0, pending: 0 };

/** What a subscription's deliveries look like now: the last day's, and those in flight. */
export interface SubscriptionActivity {
  last24h: RecentDeliveries;
  inFlight: number;
}

const NO_ACTIVITY: SubscriptionActivity = { last24h: NO_DELIVERIES, inFlight: 0 };

function deliveryState(row: SubscriptionRow, inFlight: number, now: string): DeliveryState {
  const held = row.heldUntil !== null && row.heldUntil > now;
  let reason: DeliveryState['reason'] = null;
  if (row.deletedAt !== null) reason = 'deleted';
  else if (!row.active) reason = 'paused';
  else if (held) reason = 'retry_after';
  else if (row.backedOff) reason = 'backpressure';
  return {
    concurrencyLimit: effectiveConcurrencyLimit(row),
    inFlight,
    pausedUntil: held ? row.heldUntil : null,
    reason,
  };
}

export function toSubscription(
  row: SubscriptionRow,
  now: string,
  activity: SubscriptionActivity = NO_ACTIVITY,
): Subscription {
  return {
    id: row.id,
    url: row.url,
    events: parseStoredJson<SubscribableEventType[]>(row.events),
    active: row.active,
    pausedAt: row.pausedAt,
    pauseReason: row.pauseReason,
    consecutiveFailures: row.consecutiveFailures,
    lastSuccessAt: row.lastSuccessAt,
    lastFailureAt: row.lastFailureAt,
    last24h: activity.last24h,
    standardWebhooks: row.standardWebhooks,
    asymmetricSignatures: row.asymmetricSignatures,
    publicKey: row.asymmetricSignatures ? row.publicKey : null,
    maxConcurrency: row.maxConcurrency,
    maxPerSecond: row.maxPerSecond,
    ordering: row.ordering,
    propagateTraceContext: row.propagateTraceContext,
    filter: storedFilterOf(row),
    payload: row.payload,
    transformation: row.transformation === null ? null : { code: row.transformation },
    retrySchedule: row.retrySchedule === null ? null : parseStoredJson<string[]>(row.retrySchedule),
    ...NO_AUTH_SHOWN,
    ...(row.receiverAuth === null ? {} : parseStoredJson<ReceiverAuthShown>(row.receiverAuth)),
    deliveryState: deliveryState(row, activity.inFlight, now),
    createdAt: row.createdAt,
  };
}

const NO_AUTH_SHOWN: ReceiverAuthShown = shownReceiverAuth(NO_RECEIVER_SECRETS);

/** The subscription's payload filter as stored, parsed; null for none. */
export function storedFilterOf(row: Pick<SubscriptionRow, 'filter'>): PayloadFilter | null {
  return row.filter === null ? null : parseStoredJson<PayloadFilter>(row.filter);
}
