import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  attemptOutcome,
  endpointHoldMs,
  foldAttempts,
  MAX_RETRY_AFTER_MS,
  nextStep,
  parseRetryAfter,
  type SubscriptionCounters,
} from './cascade.ts';

const SCHEDULE = [60_000, 300_000, 1_800_000];
const T0 = Date.parse('2026-11-24T10:00:00.000Z');
const iso = (ms: number) => new Date(T0 + ms).toISOString();

describe('nextStep: what an attempt does to its delivery', () => {
  it('delivers on any whole 2xx, at the time it finished', () => {
    for (const status of [200, 201, 204, 299]) {
      assert.deepEqual(nextStep(1, status, SCHEDULE, T0), {
        status: 'success',
        deliveredAt: iso(0),
        nextAttemptAt: null,
      });
    }
  });

  it('retries after the wait of its attempt number while the schedule lasts', () => {
    assert.equal(nextStep(1, 500, SCHEDULE, T0).nextAttemptAt, iso(60_000));
    assert.equal(nextStep(2, null, SCHEDULE, T0).nextAttemptAt, iso(300_000));
    assert.equal(nextStep(3, 404, SCHEDULE, T0).nextAttemptAt, iso(1_800_000));
    for (const status of [null, 100, 199, 300, 301, 400, 410, 429, 500, 503]) {
      assert.equal(nextStep(1, status, SCHEDULE, T0).status, 'pending', String(status));
    }
  });

  it('dead-letters the attempt after the last wait (attempts = waits + 1), whatever failed', () => {
    for (const status of [null, 410, 500]) {
      assert.deepEqual(nextStep(4, status, SCHEDULE, T0), {
        status: 'dead_letter',
        deliveredAt: null,
        nextAttemptAt: null,
      });
    }
    // Even a stale claim counted past the schedule: never another attempt.
    assert.equal(nextStep(9, 500, SCHEDULE, T0).status, 'dead_letter');
    // The last attempt still delivers on a 2xx.
    assert.equal(nextStep(4, 200, SCHEDULE, T0).status, 'success');
    // An empty schedule: one attempt only.
    assert.equal(nextStep(1, 500, [], T0).status, 'dead_letter');
  });
});

describe('foldAttempts: a batch of attempts and the subscription counters', () => {
  const fresh: SubscriptionCounters = {
    consecutiveFailures: 0,
    clientErrorRun: 0,
    clientErrorRunSince: null,
    lastSuccessAt: null,
    lastFailureAt: null,
  };
  const rule = { failures: 3, windowMs: 60_000 };

  it('counts failures and the 4xx run, and a success resets both', () => {
    const { counters, pause } = foldAttempts(
      fresh,
      [
        { status: 403, at: iso(0) },
        { status: 404, at: iso(1_000) },
      ],
      rule,
      true,
    );
    assert.deepEqual(counters, {
      consecutiveFailures: 2,
      clientErrorRun: 2,
      clientErrorRunSince: iso(0),
      lastSuccessAt: null,
      lastFailureAt: iso(1_000),
    });
    assert.equal(pause, null);
    const after = foldAttempts(counters, [{ status: 204, at: iso(2_000) }], rule, true);
    assert.deepEqual(after.counters, {
      consecutiveFailures: 0,
      clientErrorRun: 0,
      clientErrorRunSince: null,
      lastSuccessAt: iso(2_000),
      lastFailureAt: iso(1_000),
    });
  });

  it('a 5xx or a time-out breaks the 4xx run but still counts as a failure', () => {
    for (const status of [500, 503, null]) {
      const { counters } = foldAttempts(
        fresh,
        [
          { status: 400, at: iso(0) },
          { status, at: iso(1) },
        ],
        rule,
        true,
      );
      assert.equal(counters.consecutiveFailures, 2);
      assert.equal(counters.clientErrorRun, 0);
      assert.equal(counters.clientErrorRunSince, null);
    }
  });

  it("a broker's refusal runs like a 4xx; its back pressure and our own failures break the run", () => {
    const refused = (ms: number) =>
      ({ status: null, at: iso(ms), errorClass: 'broker_refused' }) as const;
    const { counters, pause } = foldAttempts(
      fresh,
      [refused(0), { status: 401, at: iso(30_000) }, refused(60_000)],
      rule,
      true,
    );
    assert.equal(counters.clientErrorRun, 3);
    assert.equal(pause, 'consecutive_failures');
    for (const errorClass of [
      'broker_busy',
      'connection_refused',
      'timeout',
      'internal',
    ] as const) {
      const broken = foldAttempts(
        fresh,
        [refused(0), { status: null, at: iso(1), errorClass }],
        rule,
        true,
      );
      assert.equal(broken.counters.clientErrorRun, 0, errorClass);
      assert.equal(broken.counters.consecutiveFailures, 2, errorClass);
    }
  });

  it('counts credentials a token server refused as a refusal; one out of reach breaks the run', () => {
    const refused = (ms: number) =>
      ({ status: null, at: iso(ms), errorClass: 'auth_failed', credentialsRefused: true }) as const;
    const { counters, pause } = foldAttempts(
      fresh,
      [refused(0), { status: 403, at: iso(30_000) }, refused(60_000)],
      rule,
      true,
    );
    assert.equal(counters.clientErrorRun, 3);
    assert.equal(pause, 'consecutive_failures');
    const unreachable = { status: null, at: iso(1), errorClass: 'auth_failed' } as const;
    const broken = foldAttempts(fresh, [refused(0), unreachable], rule, true);
    assert.equal(broken.counters.clientErrorRun, 0);
    assert.equal(broken.counters.consecutiveFailures, 2);
  });

  it('pauses once the run is long enough and spans the window, not before', () => {
    const run = (spanMs: number, n: number) =>
      Array.from({ length: n }, (_, i) => ({
        status: 404,
        at: iso(Math.round((spanMs * i) / (n - 1))),
      }));
    assert.equal(foldAttempts(fresh, run(60_000, 3), rule, true).pause, 'consecutive_failures');
    assert.equal(foldAttempts(fresh, run(59_999, 3), rule, true).pause, null, 'too short');
    assert.equal(foldAttempts(fresh, run(120_000, 2), rule, true).pause, null, 'too few');
    // Already paused or deleted: counted, never paused again.
    assert.equal(foldAttempts(fresh, run(60_000, 3), rule, false).pause, null);
  });

  it('continues a run across batches, from the stored counters', () => {
    const first = foldAttempts(fresh, [{ status: 404, at: iso(0) }], rule, true);
    const second = foldAttempts(
      first.counters,
      [
        { status: 404, at: iso(30_000) },
        { status: 404, at: iso(60_000) },
      ],
      rule,
      true,
    );
    assert.equal(second.counters.clientErrorRun, 3);
    assert.equal(second.pause, 'consecutive_failures');
  });

  it('pauses at once on a 410 Gone, whatever the run; never a paused one again', () => {
    const gone = [
      { status: 500, at: iso(0) },
      { status: 410, at: iso(1_000) },
      { status: 200, at: iso(2_000) },
    ];
    assert.equal(foldAttempts(fresh, gone, rule, true).pause, 'gone');
    assert.equal(foldAttempts(fresh, gone, rule, false).pause, null);
    // A run long enough to pause, ended by a 410: the receiver's word is the reason.
    const run = [0, 30_000, 60_000].map((ms) => ({ status: 410, at: iso(ms) }));
    assert.equal(foldAttempts(fresh, run, rule, true).pause, 'gone');
  });

  it('keeps a delivery answered 410 pending and due (its subscription pauses); a test fire cascades', () => {
    const delivery = { id: 'dlv_1', claimedAt: iso(0), attempts: 6, isTest: false };
    const answer = { status: 410, errorClass: null };
    const kept = attemptOutcome(delivery, answer, SCHEDULE, T0).outcome;
    assert.equal(kept.status, 'pending');
    assert.equal(kept.nextAttemptAt, iso(0));
    const test = attemptOutcome({ ...delivery, isTest: true }, answer, SCHEDULE, T0).outcome;
    assert.equal(test.status, 'dead_letter');
  });

  it('keeps only the counters when given a whole row', () => {
    const row = { ...fresh, id: 'whs_1', url: 'https://example.test/hook', active: true };
    const { counters } = foldAttempts(row, [], rule, true);
    assert.deepEqual(Object.keys(counters).sort(), Object.keys(fresh).sort());
  });
});

describe("a receiver's Retry-After", () => {
  it('reads seconds and HTTP dates, and nothing else', () => {
    assert.equal(parseRetryAfter('120', T0), 120_000);
    assert.equal(parseRetryAfter(' 0 ', T0), 0);
    assert.equal(parseRetryAfter(new Date(T0 + 90_000).toUTCString(), T0), 90_000);
    assert.equal(parseRetryAfter(new Date(T0 - 90_000).toUTCString(), T0), 0, 'past: now');
    for (const value of [undefined, '', '-5', '1.5', '1e3', 'soon', '2026-11-24']) {
      assert.equal(parseRetryAfter(value, T0), null, String(value));
    }
  });

  it('retries a 429 or 503 at the later of the scheduled wait and the Retry-After', () => {
    // Scheduled wait 60 s for attempt 1.
    assert.equal(nextStep(1, 429, SCHEDULE, T0, 90_000).nextAttemptAt, iso(90_000));
    assert.equal(nextStep(1, 503, SCHEDULE, T0, 600_000).nextAttemptAt, iso(600_000));
    assert.equal(nextStep(1, 429, SCHEDULE, T0, 5_000).nextAttemptAt, iso(60_000), 'never sooner');
    // Other statuses ignore it, and it never saves a delivery from the dead letter.
    assert.equal(nextStep(1, 500, SCHEDULE, T0, 90_000).nextAttemptAt, iso(60_000));
    assert.equal(nextStep(4, 429, SCHEDULE, T0, 90_000).status, 'dead_letter');
  });

  it('never lets a Retry-After hold more than an hour; the schedule itself may be longer', () => {
    assert.equal(nextStep(1, 503, SCHEDULE, T0, 86_400_000).nextAttemptAt, iso(MAX_RETRY_AFTER_MS));
    assert.equal(MAX_RETRY_AFTER_MS, 3_600_000);
    const long = [20 * 3_600_000];
    assert.equal(nextStep(1, 503, long, T0, 30 * 3_600_000).nextAttemptAt, iso(20 * 3_600_000));
  });

  it('holds the whole endpoint only on a 429 or 503 that asks, at most an hour', () => {
    assert.equal(endpointHoldMs(429, 3_000), 3_000);
    assert.equal(endpointHoldMs(503, 0), 0);
    assert.equal(endpointHoldMs(503, 86_400_000), MAX_RETRY_AFTER_MS);
    assert.equal(endpointHoldMs(429, null), null, 'no or an invalid Retry-After');
    assert.equal(endpointHoldMs(500, 3_000), null);
    assert.equal(endpointHoldMs(null, 3_000), null);
  });
});
