import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ClaimedDelivery, SettledAttempt } from './types.ts';
import { WorkerClaims } from './worker-claims.ts';

const row = (id: string) =>
  ({ id, subscriptionId: 'whs_a', tenantId: 'ten_a' }) as unknown as ClaimedDelivery;
const attempt = (id: string) => ({ delivery: row(id) }) as unknown as SettledAttempt;
const idsOf = (batch: {
  attempts: SettledAttempt[];
  givenBack: Array<{ delivery: { id: string } }>;
}) => [...batch.attempts.map((s) => s.delivery.id), ...batch.givenBack.map((g) => g.delivery.id)];

describe('WorkerClaims: the one record of a claim, from the claim to its recorded outcome', () => {
  it('hands the recorder its settlements in the order they settled, each once', () => {
    const claims = new WorkerClaims();
    claims.claimed(['d1', 'd2', 'd3'].map(row));
    claims.settled('d3', { attempt: attempt('d3') });
    claims.settled('d1', { givenBack: { delivery: row('d1'), nextAttemptAt: 'later' } });
    claims.settled('d2', { attempt: attempt('d2') });
    // A second settlement of one claim changes nothing.
    claims.settled('d2', { givenBack: { delivery: row('d2'), nextAttemptAt: 'later' } });
    assert.equal(claims.unrecorded, 3);
    const batch = claims.toRecord();
    assert.deepEqual(
      batch.attempts.map((s) => s.delivery.id),
      ['d3', 'd2'],
    );
    assert.deepEqual(idsOf(batch), ['d3', 'd2', 'd1']);
    assert.equal(claims.unrecorded, 0);
    assert.deepEqual(idsOf(claims.toRecord()), [], 'each once');
    // While it records, the rows are still this worker's, settled: the claim counts them so.
    assert.deepEqual(claims.settledIds().sort(), ['d1', 'd2', 'd3']);
  });

  it('keeps a batch that failed to record, first in the next one; forgets a recorded claim', () => {
    const claims = new WorkerClaims();
    claims.claimed(['d1', 'd2'].map(row));
    claims.settled('d1', { attempt: attempt('d1') });
    const failed = claims.toRecord();
    claims.settled('d2', { attempt: attempt('d2') });
    claims.notRecorded(idsOf(failed));
    assert.equal(claims.unrecorded, 2);
    const next = claims.toRecord();
    assert.deepEqual(idsOf(next), ['d1', 'd2']);
    for (const id of idsOf(next)) claims.recorded(id);
    assert.deepEqual(claims.claimedIds(), []);
  });

  it('says which held rows were never settled (a run that threw)', () => {
    const claims = new WorkerClaims();
    claims.claimed([row('d1'), row('d2')]);
    claims.settled('d2', { attempt: attempt('d2') });
    assert.equal(claims.unsettled('d1'), true);
    assert.equal(claims.unsettled('d2'), false);
    assert.equal(claims.unsettled('unknown'), false);
  });
});
