/** Lifecycles and their allowed moves (any other move is 409 `invalid_transition`). */

export const TRIP_STATUSES = [
  'draft',
  'active',
  'sent',
  'accepted',
  'rejected',
  'archived',
] as const;
export type TripStatus = (typeof TRIP_STATUSES)[number];

export const TRIP_TRANSITIONS: Record<TripStatus, readonly TripStatus[]> = {
  draft: ['active', 'archived'],
  active: ['sent', 'archived'],
  sent: ['accepted', 'rejected', 'archived'],
  accepted: ['active', 'archived'],
  rejected: ['active', 'archived'],
  archived: [],
};

export const BOOKING_STATUSES = [
  'payment_pending',
  'deposit_paid',
  'confirmed',
  'trip_in_progress',
  'completed',
  'cancelled',
  'refunded',
  'disputed',
] as const;
export type BookingStatus = (typeof BOOKING_STATUSES)[number];

export const BOOKING_TRANSITIONS: Record<BookingStatus, readonly BookingStatus[]> = {
  payment_pending: ['deposit_paid'],
  deposit_paid: ['confirmed'],
  confirmed: ['trip_in_progress', 'cancelled', 'refunded', 'disputed'],
  trip_in_progress: ['completed'],
  completed: [],
  cancelled: [],
  refunded: [],
  disputed: ['confirmed', 'refunded'],
};

export const PAYMENT_STATUSES = [
  'pending',
  'scheduled',
  'processing',
  'succeeded',
  'failed',
  'cancelled',
] as const;
export type PaymentStatus = (typeof PAYMENT_STATUSES)[number];

export const PAYMENT_TRANSITIONS: Record<PaymentStatus, readonly PaymentStatus[]> = {
  pending: ['scheduled', 'processing', 'cancelled'],
  scheduled: ['processing', 'cancelled'],
  processing: ['succeeded', 'failed'],
  failed: ['scheduled'],
  succeeded: [],
  cancelled: [],
};

type Move<S extends string> = `${S}>${S}`;

/**
 * The events each move emits, in order: its own types where the spec names some, else the
 * resource's `.updated` (every change is announced, docs/mirroring.md).
 */
function moveEvents<S extends string>(
  transitions: Record<S, readonly S[]>,
  own: Partial<Record<Move<S>, readonly EventType[]>>,
  updated: EventType,
): Record<Move<S>, readonly EventType[]> {
  const events = {} as Record<Move<S>, readonly EventType[]>;
  for (const from of Object.keys(transitions) as S[]) {
    for (const to of transitions[from]) events[`${from}>${to}`] = own[`${from}>${to}`] ?? [updated];
  }
  return events;
}

/** The booking moves' events (the dispute exits included). */
export const BOOKING_MOVE_EVENTS = moveEvents(
  BOOKING_TRANSITIONS,
  {
    'deposit_paid>confirmed': ['booking.confirmed'],
    'confirmed>cancelled': ['booking.cancelled'],
    'confirmed>refunded': ['booking.refunded'],
    'confirmed>disputed': ['dispute.opened'],
    'disputed>confirmed': ['dispute.closed'],
    'disputed>refunded': ['dispute.closed', 'booking.refunded'],
  },
  'booking.updated',
);

export const PAYMENT_MOVE_EVENTS = moveEvents(
  PAYMENT_TRANSITIONS,
  { 'processing>succeeded': ['payment.succeeded'], 'processing>failed': ['payment.failed'] },
  'payment.updated',
);

export const TRIP_MOVE_EVENTS = moveEvents(TRIP_TRANSITIONS, {}, 'trip.updated');

/**
 * A lifecycle as readers meet it (docs/api-behaviour.md, the references' "State machines"): its
 * moves, who makes them and what each emits. Built from the tables the services enforce.
 */
export interface Lifecycle {
  name: string;
  /** Who may move it, and the operation they call. */
  mover: string;
  operation: string;
  transitions: Record<string, readonly string[]>;
  events: Partial<Record<string, readonly EventType[]>>;
}

export const LIFECYCLES: readonly Lifecycle[] = [
  {
    name: 'Trip status',
    mover: 'operator console',
    operation: 'POST /admin/v1/trips/{id}/status',
    transitions: TRIP_TRANSITIONS,
    events: TRIP_MOVE_EVENTS,
  },
  {
    name: 'Booking status',
    mover: 'checkout',
    operation: 'POST /admin/v1/bookings/{id}/transition',
    transitions: BOOKING_TRANSITIONS,
    events: BOOKING_MOVE_EVENTS,
  },
  {
    name: 'Payment status',
    mover: 'payment processor',
    operation: 'POST /admin/v1/payments/{id}/transition',
    transitions: PAYMENT_TRANSITIONS,
    events: PAYMENT_MOVE_EVENTS,
  },
];

export const PAYMENT_MODES = ['full', 'deposit_only', 'installment'] as const;
export const CLIENT_KINDS = ['individual', 'company'] as const;
export const TRANSPORT_MODES = ['own_fleet', 'outsourced'] as const;
export const PRICING_DISPLAY_MODES = ['per_person', 'per_couple', 'total_group'] as const;
export const MEMBER_ROLES = ['owner', 'admin', 'member'] as const;

/** Narrows an untrusted string (a query filter) to one of the known values. */
export function isOneOf<const T extends readonly string[]>(
  values: T,
  value: string | undefined,
): value is T[number] {
  return value !== undefined && (values as readonly string[]).includes(value);
}

export function canMove<S extends string>(
  table: Record<S, readonly S[]>,
  from: string,
  to: string,
): boolean {
  return Object.hasOwn(table, from) && (table[from as S] as readonly string[]).includes(to);
}

export const EVENT_TYPES = [
  'booking.confirmed',
  'booking.cancelled',
  'booking.refunded',
  'payment.succeeded',
  'payment.failed',
  'dispute.opened',
  'dispute.closed',
  'trip.published',
  'trip.unpublished',
  'client.created',
  // Change events (additive, docs/mirroring.md): a create or change no type above announces.
  'trip.created',
  'trip.updated',
  'booking.created',
  'booking.updated',
  'client.updated',
  'payment.created',
  'payment.updated',
  // An erasure's announcement (docs/personal-data.md): ids only.
  'personal_data.erased',
  'webhook.endpoint.paused',
  'webhook.delivery.dead_lettered',
  'webhook.test',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/**
 * Events about the webhook platform itself, for a tenant's programs to act on: never delivered to
 * the subscription they are about, and a dead letter of one announces nothing.
 */
const OPERATIONAL_EVENT_TYPES = [
  'webhook.endpoint.paused',
  'webhook.delivery.dead_lettered',
] as const satisfies readonly EventType[];

export const isOperationalEvent = (type: string): boolean =>
  (OPERATIONAL_EVENT_TYPES as readonly string[]).includes(type);

/** Every type but `webhook.test`, which is only ever fired by a test. */
export const SUBSCRIBABLE_EVENT_TYPES = EVENT_TYPES.filter(
  (type): type is SubscribableEventType => type !== 'webhook.test',
);
export type SubscribableEventType = Exclude<EventType, 'webhook.test'>;

/**
 * Why a subscription is not active: paused by its owner (`manual`), by the auto-pause rule
 * (`consecutive_failures`), because its receiver answered 410 Gone (`gone`), or deleted.
 */
export const PAUSE_REASONS = ['manual', 'consecutive_failures', 'gone', 'deleted'] as const;
export type PauseReason = (typeof PAUSE_REASONS)[number];

/** Webhook delivery statuses. */
export const DELIVERY_STATUSES = ['pending', 'in_flight', 'success', 'dead_letter'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];
