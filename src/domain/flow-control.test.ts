import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { orderingKey } from './flow-control.ts';

describe('orderingKey: the object an event is about', () => {
  it('is the booking of booking, dispute and payment events', () => {
    for (const type of ['booking.confirmed', 'dispute.opened', 'payment.failed']) {
      assert.equal(orderingKey(type, { bookingId: 'bkg_1', tripId: 'trp_1' }), 'bkg_1', type);
    }
  });

  it('is the trip of trip events and the client of client events', () => {
    assert.equal(orderingKey('trip.published', { tripId: 'trp_1' }), 'trp_1');
    assert.equal(orderingKey('client.created', { clientId: 'cli_1' }), 'cli_1');
  });

  it('is null for a test fire or data without the member', () => {
    assert.equal(orderingKey('webhook.test', { subscriptionId: null, message: 'hi' }), null);
    assert.equal(orderingKey('booking.confirmed', {}), null);
  });
});
