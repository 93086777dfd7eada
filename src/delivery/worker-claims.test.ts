import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import type { ClaimedDelivery, SettledAttempt } from './types.ts';
import { type SettledBatch, WorkerClaims } from './worker-claims.ts';

const row = (id: string, subscriptionId = 'whs_a', tenantId = 'ten_a') =>
  ({ id, subscriptionId, tenantId, concurrencyLimit: 16 }) as unknown as ClaimedDelivery;
const attempt = (delivery: ClaimedDelivery, holdUntil: string | null = null) => ({
  attempt: { delivery, holdUntil } as unknown as SettledAttempt,
});
const givenBack = (delivery: ClaimedDelivery) => ({
  givenBack: { delivery, nextAttemptAt: 'later' },
});
const idsOf = (batch: SettledBatch) => [
  ...batch.attempts.map((s) => s.delivery.id),
  ...batch.givenBack.map((g) => g.delivery.id),
];

/**
 * A recorder that keeps each batch it is handed, fails while `failing`, and leaves the
 * deliveries in `leaves` unrecorded.
 */
function recorder() {
  const batches: SettledBatch[] = [];
  const self = {
    batches,
    failing: false,
    leaves: new Set<string>(),
    async record(batch: SettledBatch) {
      batches.push(batch);
      if (self.failing) throw new Error('database unavailable');
      return idsOf(batch).filter((id) => self.leaves.has(id));
    },
  };
  return self;
}

const claimsWith = (record: ReturnType<typeof recorder>) =>
  new WorkerClaims({ recorder: record, logger: pino({ level: 'silent' }), maxPerSubscription: 4 });

describe('WorkerClaims: the one record of a claim, from the claim to its recorded outcome', () => {
  it('has its settlements recorded in the order they settled, each once', async () => {
    const record = recorder();
    const claims = claimsWith(record);
    const [d1, d2, d3] = ['d1', 'd2', 'd3'].map((id) => row(id));
    claims.claimed([d1, d2, d3]);
    claims.settled(attempt(d3));
    claims.settled(givenBack(d1));
    claims.settled(attempt(d2));
    assert.equal(claims.settled(givenBack(d2)), null, 'a second settlement changes nothing');
    assert.deepEqual(claims.settledIds().sort(), ['d1', 'd2', 'd3'], 'in flight until recorded');
    await claims.record();
    assert.equal(record.batches.length, 1);
    assert.deepEqual(
      record.batches[0].attempts.map((s) => s.delivery.id),
      ['d3', 'd2'],
    );
    assert.deepEqual(idsOf(record.batches[0]), ['d3', 'd2', 'd1']);
    assert.deepEqual(claims.claimedIds(), [], 'recorded, forgotten');
    await claims.record();
    assert.equal(record.batches.length, 1, 'each once');
    await claims.close();
  });

  it('keeps a batch that failed to record, first in the next one', async () => {
    const record = recorder();
    const claims = claimsWith(record);
    const [d1, d2] = [row('d1'), row('d2')];
    claims.claimed([d1, d2]);
    record.failing = true;
    claims.settled(attempt(d1));
    await claims.record();
    assert.deepEqual(claims.settledIds(), ['d1'], 'still held, settled');
    record.failing = false;
    claims.settled(attempt(d2));
    await claims.record();
    assert.deepEqual(record.batches.map(idsOf), [['d1'], ['d1', 'd2']]);
    assert.deepEqual(claims.claimedIds(), []);
    await claims.close();
  });

  it('keeps only what the recorder left unrecorded, first in the next batch', async () => {
    const record = recorder();
    const claims = claimsWith(record);
    const [d1, d2, d3] = ['d1', 'd2', 'd3'].map((id) => row(id));
    claims.claimed([d1, d2, d3]);
    record.leaves = new Set(['d2', 'd3']);
    claims.settled(attempt(d1));
    claims.settled(attempt(d2));
    claims.settled(attempt(d3));
    await claims.record();
    assert.deepEqual(claims.settledIds().sort(), ['d2', 'd3'], 'd1 recorded and forgotten');
    record.leaves.clear();
    await claims.record();
    assert.deepEqual(record.batches.map(idsOf), [
      ['d1', 'd2', 'd3'],
      ['d2', 'd3'],
    ]);
    assert.deepEqual(claims.claimedIds(), []);
    await claims.close();
  });

  it('has a settlement whose answer asked for a hold recorded at once', async () => {
    const record = recorder();
    const claims = claimsWith(record);
    const [d1, d2] = [row('d1'), row('d2')];
    claims.claimed([d1, d2]);
    claims.settled(attempt(d1));
    assert.equal(record.batches.length, 0, 'an ordinary outcome waits for its batch');
    claims.settled(attempt(d2, '2026-01-01T00:00:00.000Z'));
    assert.deepEqual(record.batches.map(idsOf), [['d1', 'd2']], 'no timer waited for');
    await claims.close();
  });

  it('counts the slots a claim runs in from its claim to its settlement', async () => {
    const claims = claimsWith(recorder());
    const rows = [row('d1'), row('d2'), row('d3', 'whs_b'), row('d4', 'whs_c', 'ten_b')];
    assert.deepEqual(claims.claimed(rows), [1, 2, 1, 1], 'each at its subscription, itself too');
    assert.equal(claims.running, 4);
    assert.deepEqual(
      [...claims.runningBySubscription],
      [
        ['whs_a', 2],
        ['whs_b', 1],
        ['whs_c', 1],
      ],
    );
    assert.deepEqual(
      [...claims.runningByTenant],
      [
        ['ten_a', 3],
        ['ten_b', 1],
      ],
    );
    assert.equal(claims.limitOf('whs_a'), 4, 'the limit, capped by maxPerSubscription');
    let ended = 0;
    void claims.anyEnds().then(() => ended++);
    const allEnd = claims.allEnd();
    assert.deepEqual(claims.settled(attempt(rows[0])), {
      subscription: 1,
      tenant: 2,
      otherTenants: 1,
      limit: 4,
    });
    await Promise.resolve();
    assert.equal(ended, 1);
    assert.deepEqual(claims.settled(givenBack(rows[3])), {
      subscription: 0,
      tenant: 0,
      otherTenants: 1,
      limit: 4,
    });
    assert.equal(claims.limitOf('whs_c'), undefined, 'no longer running there');
    claims.settled(attempt(rows[1]));
    claims.settled(attempt(rows[2]));
    await allEnd;
    assert.equal(claims.running, 0);
    assert.deepEqual([...claims.runningByTenant], []);
    await claims.close();
  });

  it('keeps a claim taken again while its last settlement was being recorded', async () => {
    // The settlement's commit makes the row claimable before its answer is read here: a claim
    // on another connection can take the row again first, and the new claim is the one held.
    let commit: () => void = () => undefined;
    const batches: SettledBatch[] = [];
    const claims = new WorkerClaims({
      recorder: {
        record: (batch) => {
          batches.push(batch);
          return new Promise((resolve) => {
            commit = () => resolve([]);
          });
        },
      },
      logger: pino({ level: 'silent' }),
      maxPerSubscription: 4,
    });
    const d1 = row('d1');
    claims.claimed([d1]);
    claims.settled(attempt(d1));
    const recording = claims.record();
    claims.claimed([d1]);
    commit();
    await recording;
    assert.deepEqual(claims.claimedIds(), ['d1'], 'the new claim is held');
    assert.equal(claims.running, 1);
    assert.notEqual(claims.settled(attempt(d1)), null, 'and its settlement counts');
    const closing = claims.close();
    commit();
    await closing;
    assert.deepEqual(batches.map(idsOf), [['d1'], ['d1']], 'each settlement recorded');
    assert.deepEqual(claims.claimedIds(), []);
  });
});
