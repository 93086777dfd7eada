import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sampleEventData } from './event-samples.ts';
import { assertEventData } from './event-schemas.ts';
import { EVENT_TYPES } from './states.ts';

describe('sampleEventData', () => {
  it('gives every event type data that its published schema accepts', () => {
    for (const type of EVENT_TYPES) {
      assert.doesNotThrow(() => assertEventData(type, sampleEventData(type)), type);
    }
  });

  it('uses fresh ids each time, so a sample never names a row twice', () => {
    const first = sampleEventData('booking.confirmed');
    const second = sampleEventData('booking.confirmed');
    assert.notEqual(first.bookingId, second.bookingId);
    assert.match(first.bookingId, /^bkg_[0-9A-Z]{26}$/);
  });
});
