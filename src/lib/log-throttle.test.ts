import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LogThrottle } from './log-throttle.ts';

describe('LogThrottle', () => {
  it('says the first at once, then one an interval with the count left unsaid', () => {
    let now = 1_000;
    const throttle = new LogThrottle(60_000, () => now);
    assert.deepEqual(throttle.next(), { unsaid: 0 });
    // A batch failing every 100 ms for most of a minute: not one line more.
    for (let i = 0; i < 500; i += 1) {
      now += 100;
      assert.equal(throttle.next(), null);
    }
    now = 1_000 + 59_999;
    assert.equal(throttle.next(), null);
    now = 1_000 + 60_000;
    assert.deepEqual(throttle.next(), { unsaid: 501 });
    now += 1;
    assert.equal(throttle.next(), null);
    now += 60_000;
    assert.deepEqual(throttle.next(), { unsaid: 1 });
  });
});
