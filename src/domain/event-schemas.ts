import { type Static, type TObject, type TProperties, type TSchema, Type } from '@sinclair/typebox';
import Ajv, { type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { ChangesOf, RESOURCE_SCHEMAS, type ResourceKind } from './change-events.ts';
import type { EventType } from './states.ts';

const NullableDateTime = Type.Union([Type.String({ format: 'date-time' }), Type.Null()]);

const BookingEventData = Type.Object(
  {
    bookingId: Type.String(),
    tripId: Type.String(),
    status: Type.String(),
    totalRetailCents: Type.Integer(),
    currency: Type.String({ minLength: 3, maxLength: 3 }),
  },
  { additionalProperties: false },
);

const PaymentEventData = Type.Object(
  {
    paymentId: Type.String(),
    bookingId: Type.String(),
    status: Type.String(),
    amountCents: Type.Integer(),
    currency: Type.String({ minLength: 3, maxLength: 3 }),
  },
  { additionalProperties: false },
);

const TripEventData = Type.Object(
  {
    tripId: Type.String(),
    publicSlug: Type.Union([Type.String(), Type.Null()]),
    publishedAt: NullableDateTime,
    unpublishedAt: NullableDateTime,
  },
  { additionalProperties: false },
);

const ClientEventData = Type.Object(
  { clientId: Type.String(), kind: Type.String(), displayName: Type.String() },
  { additionalProperties: false },
);

/**
 * An event about a change of a resource: its own members, then `object` (the resource as its GET
 * shows it after the change) and `changes` (see change-events.ts).
 */
function Changed<P extends TProperties, K extends ResourceKind>(
  members: TObject<P>,
  kind: K,
  made: 'changed' | 'created' = 'changed',
) {
  const resource = RESOURCE_SCHEMAS[kind];
  const object = Type.Object(resource.properties as (typeof RESOURCE_SCHEMAS)[K]['properties'], {
    additionalProperties: false,
    description: `The ${kind} as its GET shows it after the change.`,
  });
  // A creation changes nothing: its `changes` is `{}`, and a filter on one of them never matches.
  const changes =
    made === 'created'
      ? Type.Object({}, { additionalProperties: false, description: '`{}`: a creation.' })
      : ChangesOf(resource);
  return Type.Object({ ...members.properties, object, changes }, { additionalProperties: false });
}

/** `data` of each event type, as the OpenAPI document's webhooks publish it. */
export const EVENT_DATA_SCHEMAS = {
  'booking.created': Changed(BookingEventData, 'booking', 'created'),
  'booking.updated': Changed(BookingEventData, 'booking'),
  'booking.confirmed': Changed(
    Type.Object(
      { ...BookingEventData.properties, status: Type.Literal('confirmed') },
      { additionalProperties: false },
    ),
    'booking',
  ),
  'booking.cancelled': Changed(BookingEventData, 'booking'),
  'booking.refunded': Changed(BookingEventData, 'booking'),
  'dispute.opened': Changed(BookingEventData, 'booking'),
  'dispute.closed': Changed(BookingEventData, 'booking'),
  'payment.created': Changed(PaymentEventData, 'payment', 'created'),
  'payment.updated': Changed(PaymentEventData, 'payment'),
  'payment.succeeded': Changed(PaymentEventData, 'payment'),
  'payment.failed': Changed(PaymentEventData, 'payment'),
  'trip.created': Changed(TripEventData, 'trip', 'created'),
  'trip.updated': Changed(TripEventData, 'trip'),
  'trip.published': Changed(TripEventData, 'trip'),
  'trip.unpublished': Changed(TripEventData, 'trip'),
  'client.created': Changed(ClientEventData, 'client', 'created'),
  'client.updated': Changed(ClientEventData, 'client'),
  'personal_data.erased': Type.Object(
    {
      erasureId: Type.String({ description: 'The erasure (`GET /api/v1/erasures/{id}`).' }),
      clientIds: Type.Array(Type.String(), {
        description: 'The clients whose personal members were redacted.',
      }),
      bookingIds: Type.Array(Type.String(), {
        description: 'The bookings whose traveller was redacted.',
      }),
    },
    { additionalProperties: false },
  ),
  'webhook.endpoint.paused': Type.Object(
    {
      subscriptionId: Type.String(),
      url: Type.String(),
      reason: Type.Union([Type.Literal('gone'), Type.Literal('consecutive_failures')]),
    },
    { additionalProperties: false },
  ),
  'webhook.delivery.dead_lettered': Type.Object(
    {
      subscriptionId: Type.String(),
      deliveryId: Type.String(),
      eventId: Type.String(),
      eventType: Type.String(),
      // 0 when every try of its first attempt died with its worker (`worker_lost`): an attempt
      // cut off by a crash is never counted as made.
      attempts: Type.Integer({
        minimum: 0,
        description:
          'Attempts made; 0 when a crash loop (`worker_lost`) cut off every try of the first.',
      }),
    },
    { additionalProperties: false },
  ),
  'webhook.test': Type.Object(
    { subscriptionId: Type.Union([Type.String(), Type.Null()]), message: Type.String() },
    { additionalProperties: false },
  ),
} satisfies Record<EventType, TSchema>;

export type EventData<T extends EventType> = Static<(typeof EVENT_DATA_SCHEMAS)[T]>;

// The validator the API's own requests are checked with (the catalog's schemas are these).
const ajv = addFormats.default(new Ajv.default({ strict: false }));
/** Each type's validator, compiled at its first emit (start-up compiles none). */
const checkers = new Map<EventType, ValidateFunction>();

/** Emit-time validation: a payload that breaks its published schema is a bug, never sent. */
export function assertEventData(type: EventType, data: unknown): void {
  let check = checkers.get(type);
  if (check === undefined) {
    check = ajv.compile(EVENT_DATA_SCHEMAS[type]);
    checkers.set(type, check);
  }
  if (!check(data)) {
    const first = check.errors?.[0];
    throw new Error(
      `event ${type} data violates its schema at ${first?.instancePath || '/'}: ${first?.message}`,
    );
  }
}
