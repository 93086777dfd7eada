import { FormatRegistry, type Static, type TSchema, Type } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import type { EventType } from './states.ts';

// TypeBox rejects unknown formats; ours are always toISOString() output.
if (!FormatRegistry.Has('date-time')) {
  FormatRegistry.Set('date-time', (value) => !Number.isNaN(Date.parse(value)));
}

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

/** `data` of each event type, as the OpenAPI document's webhooks publish it. */
export const EVENT_DATA_SCHEMAS = {
  'booking.confirmed': Type.Object(
    { ...BookingEventData.properties, status: Type.Literal('confirmed') },
    { additionalProperties: false },
  ),
  'booking.cancelled': BookingEventData,
  'booking.refunded': BookingEventData,
  'dispute.opened': BookingEventData,
  'dispute.closed': BookingEventData,
  'payment.succeeded': PaymentEventData,
  'payment.failed': PaymentEventData,
  'trip.published': TripEventData,
  'trip.unpublished': TripEventData,
  'client.created': Type.Object(
    { clientId: Type.String(), kind: Type.String(), displayName: Type.String() },
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
      attempts: Type.Integer({ minimum: 1 }),
    },
    { additionalProperties: false },
  ),
  'webhook.test': Type.Object(
    { subscriptionId: Type.Union([Type.String(), Type.Null()]), message: Type.String() },
    { additionalProperties: false },
  ),
} satisfies Record<EventType, TSchema>;

export type EventData<T extends EventType> = Static<(typeof EVENT_DATA_SCHEMAS)[T]>;

const checkers = Object.fromEntries(
  Object.entries(EVENT_DATA_SCHEMAS).map(([type, schema]) => [type, TypeCompiler.Compile(schema)]),
) as unknown as Record<EventType, ReturnType<typeof TypeCompiler.Compile>>;

/** Emit-time validation: a payload that breaks its published schema is a bug, never sent. */
export function assertEventData(type: EventType, data: unknown): void {
  const checker = checkers[type];
  if (!checker.Check(data)) {
    const first = checker.Errors(data).First();
    throw new Error(`event ${type} data violates its schema at ${first?.path}: ${first?.message}`);
  }
}
