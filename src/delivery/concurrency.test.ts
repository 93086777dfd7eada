import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ATTEMPT_ERROR_CLASSES } from '../domain/attempts.ts';
import {
  type ConcurrencySample,
  foldConcurrency,
  isPushback,
  nextConcurrency,
} from './concurrency.ts';

const sample = (over: Partial<ConcurrencySample>): ConcurrencySample => ({
  limitAtSend: 8,
  runningAtSend: 8,
  status: 200,
  errorClass: null,
  ...over,
});
const at = (limit: number, backedOff = false) => ({ limit, backedOff });

describe('isPushback: answers that say the endpoint is overloaded', () => {
  it("takes 429, 502, 503, 504, time-outs, refused or reset connections and a broker's back-pressure", () => {
    for (const status of [429, 502, 503, 504]) assert.equal(isPushback(status, null), true);
    for (const errorClass of [
      'timeout',
      'connection_refused',
      'connection_reset',
      'broker_busy',
    ] as const) {
      assert.equal(isPushback(null, errorClass), true);
    }
  });

  it('leaves out every other status and error class', () => {
    for (const status of [200, 204, 301, 400, 404, 410, 500, 501, 505]) {
      assert.equal(isPushback(status, null), false, String(status));
    }
    const load = new Set(['timeout', 'connection_refused', 'connection_reset', 'broker_busy']);
    for (const errorClass of ATTEMPT_ERROR_CLASSES.filter((c) => !load.has(c))) {
      assert.equal(isPushback(null, errorClass), false, errorClass);
    }
  });
});

describe('nextConcurrency: additive increase, multiplicative decrease', () => {
  it('halves on a push back, never below 1, and says so', () => {
    assert.deepEqual(nextConcurrency(at(8), sample({ status: 503 }), 16), at(4, true));
    assert.deepEqual(
      nextConcurrency(at(5), sample({ limitAtSend: 5, status: 429 }), 16),
      at(2, true),
    );
    assert.deepEqual(
      nextConcurrency(at(1), sample({ limitAtSend: 1, status: null, errorClass: 'timeout' }), 16),
      at(1, true),
    );
  });

  it('grows by 1 on a 2xx sent with the whole limit in use, up to the maximum', () => {
    assert.deepEqual(nextConcurrency(at(8), sample({}), 16), at(9));
    assert.deepEqual(
      nextConcurrency(at(16), sample({ limitAtSend: 16, runningAtSend: 16 }), 16),
      at(16),
    );
  });

  it('does not grow when the limit was not in use', () => {
    assert.deepEqual(nextConcurrency(at(8), sample({ runningAtSend: 7 }), 16), at(8));
  });

  it('answers a burst of push backs with one cut', () => {
    const burst = Array.from({ length: 6 }, () => sample({ status: 503 }));
    assert.deepEqual(foldConcurrency(at(8), burst, 16), at(4, true));
  });

  it('ignores a 2xx sent under another limit than the current one', () => {
    const cutThenLate = [sample({ status: 503 }), sample({ status: 200 })];
    assert.deepEqual(foldConcurrency(at(8), cutThenLate, 16), at(4, true));
    const grownThenLate = [sample({}), sample({})];
    assert.deepEqual(foldConcurrency(at(8), grownThenLate, 16), at(9));
  });

  it('leaves the limit alone on answers that say nothing of load', () => {
    for (const status of [400, 404, 500]) {
      assert.deepEqual(nextConcurrency(at(8, true), sample({ status }), 16), at(8, true));
    }
    assert.deepEqual(
      nextConcurrency(at(8), sample({ status: null, errorClass: 'tls' }), 16),
      at(8),
    );
  });

  it('clears the cut once grown back to the maximum', () => {
    assert.deepEqual(
      nextConcurrency(at(14, true), sample({ limitAtSend: 14, runningAtSend: 14 }), 16),
      at(15, true),
    );
    assert.deepEqual(
      nextConcurrency(at(15, true), sample({ limitAtSend: 15, runningAtSend: 15 }), 16),
      at(16),
    );
  });

  it('keeps within a maximum lowered below the stored limit', () => {
    assert.deepEqual(foldConcurrency(at(12), [], 6), at(6));
    assert.deepEqual(
      nextConcurrency(at(12), sample({ limitAtSend: 6, runningAtSend: 6, status: 503 }), 6),
      at(3, true),
    );
  });

  // A receiver that fails every request beyond its third concurrent one, driven round by round:
  // each round sends the whole limit at once. The limit must settle between 2 and 5 and waste
  // few attempts.
  it('settles near the capacity of an endpoint that refuses above it', () => {
    const capacity = 3;
    let state = at(4);
    let sent = 0;
    let refused = 0;
    const seen: number[] = [];
    for (let round = 0; round < 60; round++) {
      const limit = state.limit;
      const samples = Array.from({ length: limit }, (_, i) => {
        sent += 1;
        const status = i + 1 > capacity ? 503 : 200;
        if (status === 503) refused += 1;
        return { limitAtSend: limit, runningAtSend: i + 1, status, errorClass: null };
      });
      state = foldConcurrency(state, samples, 16);
      if (round >= 5) seen.push(state.limit);
    }
    assert.ok(Math.min(...seen) >= 2 && Math.max(...seen) <= 5, `limits ${seen.join(',')}`);
    assert.ok(refused / sent < 0.2, `${refused} of ${sent} refused`);
  });
});
