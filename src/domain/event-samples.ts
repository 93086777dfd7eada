import { type IdPrefix, newId } from '../lib/ids.ts';
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
  const booking = {
    bookingId: id('bkg'),
    tripId: id('trp'),
    totalRetailCents: 249_000,
    currency: 'EUR',
  };
  const payment = {
    paymentId: id('pay'),
    bookingId: id('bkg'),
    amountCents: 74_700,
    currency: 'EUR',
  };
  const tripId = id('trp');
  const at = now.toISOString();
  const samples: { [K in EventType]: EventData<K> } = {
    'booking.confirmed': { ...booking, status: 'confirmed' },
    'booking.cancelled': { ...booking, status: 'cancelled' },
    'booking.refunded': { ...booking, status: 'refunded' },
    'dispute.opened': { ...booking, status: 'disputed' },
    'dispute.closed': { ...booking, status: 'confirmed' },
    'payment.succeeded': { ...payment, status: 'succeeded' },
    'payment.failed': { ...payment, status: 'failed' },
    'trip.published': {
      tripId,
      publicSlug: 'lisbon-in-spring-3f9a2c',
      publishedAt: at,
      unpublishedAt: null,
    },
    'trip.unpublished': {
      tripId,
      publicSlug: 'lisbon-in-spring-3f9a2c',
      publishedAt: at,
      unpublishedAt: at,
    },
    'client.created': {
      clientId: id('cli'),
      kind: 'individual',
      displayName: 'Ana Lima',
    },
    'webhook.endpoint.paused': {
      subscriptionId: id('whs'),
      url: 'https://hooks.operator.test/tourops',
      reason: 'gone',
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
