import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { mayHaveMore, reopening, subscriptionLevels, tenantClaimPlan } from './admission.ts';

describe('subscriptionLevels and mayHaveMore', () => {
  it('claims half the limit, reopens below the other half, runs low at half of that', () => {
    assert.deepEqual(subscriptionLevels(16), { share: 8, reopen: 8, low: 4 });
    assert.deepEqual(subscriptionLevels(5), { share: 3, reopen: 2, low: 1 });
    assert.deepEqual(subscriptionLevels(1), { share: 1, reopen: 0, low: 0 });
  });

  const worker = (runningBySubscription: Map<string, number>) => ({
    plan: tenantClaimPlan(new Map(), 256, 64),
    levels: () => subscriptionLevels(16),
    runningBySubscription,
    runningByTenant: new Map<string, number>(),
    maxRunning: 256,
    maxPerSubscription: 64,
  });
  const rows = (n: number) =>
    Array.from({ length: n }, () => ({ subscriptionId: 's', tenantId: 't' }));

  it('claims again at once after a claim cut by its limit, or by a share that will not signal', () => {
    assert.equal(mayHaveMore(rows(10), 10, worker(new Map())), true);
    // A whole share taken, and the subscription at its reopen level: no attempt end will signal.
    assert.equal(mayHaveMore(rows(8), 20, worker(new Map([['s', 8]]))), true);
  });

  it('waits for a signal after a claim that took everything there was', () => {
    assert.equal(mayHaveMore([], 10, worker(new Map())), false);
    assert.equal(mayHaveMore(rows(3), 20, worker(new Map([['s', 3]]))), false);
    // Past its reopen level, its attempts signal as they end.
    assert.equal(mayHaveMore(rows(8), 20, worker(new Map([['s', 9]]))), false);
  });
});

describe('reopening: what a settled claim tells the claim loop', () => {
  const left = (subscription: number, tenant: number, limit = 16) => ({
    subscription,
    tenant,
    otherTenants: 0,
    limit,
  });

  it('signals at once at the low level, deferred at the reopen level, else not at all', () => {
    // Limit 16: reopen at 8, low at 4. Tenant cap alone 128 of 256: reopens at 96.
    assert.equal(reopening(left(4, 50), 256, 64), 'low');
    assert.equal(reopening(left(8, 50), 256, 64), 'reopened');
    assert.equal(reopening(left(7, 50), 256, 64), null);
    assert.equal(reopening(left(9, 50), 256, 64), null);
  });

  it("signals a tenant's reopening first, whatever its subscription's level", () => {
    assert.equal(reopening(left(4, 96), 256, 64), 'reopened');
    assert.equal(reopening(left(7, 96), 256, 64), 'reopened');
    assert.equal(reopening(left(7, 95), 256, 64), null);
  });
});
