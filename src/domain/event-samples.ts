import { type IdPrefix, newId } from '../lib/ids.ts';
import { type Changes, changesBetween, type ResourceObject } from './change-events.ts';
import type { EventData } from './event-schemas.ts';
import type { EventType } from './states.ts';

/**
 * A realistic `data` of each event type, with fresh ids that name no real row: what a test fire
 * of that type sends (`POST /api/v1/webhooks/test` with `eventType`). Typed by EventType, so a
 * new event type does not compile until it has a sample; the tests check each against its schema.
 */
export function sampleEventData<T extends EventType>(
  type: T,
  now = new Date(),
  id: (prefix: IdPrefix) => string = newId,
): EventData<T> {
  const at = now.toISOString();
  const earlier = new Date(now.getTime() - 86_400_000).toISOString();
  const trip: ResourceObject<'trip'> = {
    id: id('trp'),
    tripNumber: 'TR-7K2M9Q',
    title: 'Lisbon in spring',
    status: 'active',
    tripMode: 'tailor_made',
    dateMode: 'range_based',
    publicSlug: 'lisbon-in-spring-3f9a2c',
    publishedAt: at,
    unpublishedAt: null,
    startDate: '2027-04-12T00:00:00.000Z',
    endDate: '2027-04-17T00:00:00.000Z',
    daysCount: 6,
    startCityId: id('cty'),
    endCityId: id('cty'),
    transportMode: 'own_fleet',
    pricingDisplayMode: 'per_person',
    shortDescription: 'Six days of tiles, trams and the Atlantic.',
    longDescription: null,
    clientId: null,
    notes: null,
    createdAt: earlier,
    updatedAt: at,
  };
  const booking: ResourceObject<'booking'> = {
    id: id('bkg'),
    bookingNumber: 'BK-4HQ8ZD',
    tripId: trip.id,
    tripVersion: 3,
    status: 'confirmed',
    totalRetailCents: 249_000,
    applicationFeeCents: 4_000,
    currency: 'EUR',
    travelerName: 'Ana Lima',
    travelerEmail: 'ana.lima@example.com',
    confirmedAt: at,
    cancelledAt: null,
    departureId: null,
    departureStartDate: '2027-04-12T00:00:00.000Z',
    departureEndDate: '2027-04-17T00:00:00.000Z',
    createdAt: earlier,
    updatedAt: at,
  };
  const payment: ResourceObject<'payment'> = {
    id: id('pay'),
    bookingId: booking.id,
    mode: 'deposit_only',
    status: 'succeeded',
    label: 'Deposit 30%',
    amountCents: 74_700,
    currency: 'EUR',
    scheduledFor: null,
    chargedAt: at,
    isDeposit: true,
    paymentRail: 'card',
    kind: 'deposit',
  };
  const client: ResourceObject<'client'> = {
    id: id('cli'),
    kind: 'individual',
    displayName: 'Ana Lima',
    legalName: null,
    email: 'ana.lima@example.com',
    phone: null,
    countryIso: 'PT',
    language: 'pt',
    currency: 'EUR',
    vatId: null,
    tags: ['repeat'],
    notes: null,
    archivedAt: null,
    createdAt: earlier,
    updatedAt: at,
  };
  /**
   * The resource after a change from `before` (its members overriding `after`'s), and what moved;
   * `before` null: a creation.
   */
  const changed = <O extends object>(
    after: O,
    before: Partial<O> | null,
  ): { object: O; changes: Changes } => ({
    object: after,
    changes: before === null ? {} : changesBetween({ ...after, ...before }, after),
  });
  const bookingOf = (status: ResourceObject<'booking'>['status'], before: object | null) => {
    const after = { ...booking, status };
    return {
      bookingId: booking.id,
      tripId: booking.tripId,
      status,
      totalRetailCents: booking.totalRetailCents,
      currency: booking.currency,
      ...changed(after, before && { ...before, updatedAt: earlier }),
    };
  };
  const paymentOf = (status: ResourceObject<'payment'>['status'], before: object | null) => {
    const after = { ...payment, status, chargedAt: status === 'succeeded' ? at : null };
    return {
      paymentId: payment.id,
      bookingId: payment.bookingId,
      status,
      amountCents: payment.amountCents,
      currency: payment.currency,
      ...changed(after, before),
    };
  };
  const tripOf = (after: ResourceObject<'trip'>, before: object | null) => ({
    tripId: after.id,
    publicSlug: after.publicSlug,
    publishedAt: after.publishedAt,
    unpublishedAt: after.unpublishedAt,
    ...changed(after, before && { ...before, updatedAt: earlier }),
  });
  const clientOf = (after: ResourceObject<'client'>, before: object | null) => ({
    clientId: after.id,
    kind: after.kind,
    displayName: after.displayName,
    ...changed(after, before && { ...before, updatedAt: earlier }),
  });
  const unpublished = { ...trip, unpublishedAt: at };
  const samples: { [K in EventType]: EventData<K> } = {
    'booking.confirmed': {
      ...bookingOf('confirmed', { status: 'deposit_paid', confirmedAt: null }),
      status: 'confirmed',
    },
    'booking.cancelled': bookingOf('cancelled', { status: 'confirmed', cancelledAt: null }),
    'booking.refunded': bookingOf('refunded', { status: 'confirmed' }),
    'dispute.opened': bookingOf('disputed', { status: 'confirmed' }),
    'dispute.closed': bookingOf('confirmed', { status: 'disputed' }),
    'booking.created': bookingOf('payment_pending', null),
    'booking.updated': bookingOf('deposit_paid', { status: 'payment_pending' }),
    'payment.succeeded': paymentOf('succeeded', { status: 'processing', chargedAt: null }),
    'payment.failed': paymentOf('failed', { status: 'processing' }),
    'payment.created': paymentOf('pending', null),
    'payment.updated': paymentOf('scheduled', { status: 'pending' }),
    'trip.published': tripOf(trip, { publicSlug: null, publishedAt: null }),
    'trip.unpublished': tripOf(unpublished, { unpublishedAt: null }),
    'trip.created': tripOf({ ...trip, status: 'draft', publicSlug: null, publishedAt: null }, null),
    'trip.updated': tripOf(trip, { title: 'Lisbon in April', daysCount: 5 }),
    'client.created': clientOf(client, null),
    'client.updated': clientOf({ ...client, archivedAt: at }, { archivedAt: null }),
    'webhook.endpoint.paused': {
      subscriptionId: id('whs'),
      url: 'https://hooks.operator.test/tourops',
      reason: 'gone',
    },
    'personal_data.erased': {
      erasureId: id('era'),
      clientIds: [id('cli')],
      bookingIds: [],
    },
    'webhook.delivery.dead_lettered': {
      subscriptionId: id('whs'),
      deliveryId: id('dlv'),
      eventId: '0a4c7e52-8f3b-4d1e-9b6a-2c5f8e1d3a70',
      eventType: 'booking.confirmed',
      attempts: 6,
    },
    'webhook.test': {
      subscriptionId: null,
      message: 'This is a test event fired from POST /api/v1/webhooks/test.',
    },
  };
  return samples[type];
}
