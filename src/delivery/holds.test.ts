import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Holds, STORED_HOLD_READ_MS } from './holds.ts';

const never = async () => {
  throw new Error('no stored hold is read here');
};

describe('Holds: the endpoints receivers asked to wait', () => {
  it('holds until the latest asked, and lets go once that has passed', () => {
    const holds = new Holds(never);
    holds.hold('whs_a', 2_000);
    holds.hold('whs_a', 1_500);
    assert.equal(holds.heldUntil('whs_a', 1_000), 2_000);
    assert.deepEqual(holds.held(1_999), ['whs_a']);
    assert.equal(holds.heldUntil('whs_a', 2_000), null);
    assert.deepEqual(holds.held(2_000), []);
    assert.equal(holds.heldUntil('whs_b', 0), null);
  });

  it("reads another process's hold at a start at most once per window, a failure no hold", async () => {
    const reads: string[] = [];
    let stored: string | null = null;
    let failing = false;
    let nowMs = 0;
    const clock = { now: () => new Date(nowMs) };
    const holds = new Holds(async (id) => {
      reads.push(id);
      if (failing) throw new Error('database unavailable');
      return stored;
    });
    assert.equal(await holds.atStart('whs_a', clock, false), null);
    assert.deepEqual(reads, [], 'nothing read unless asked');
    const [a, b] = await Promise.all([
      holds.atStart('whs_a', clock, true),
      holds.atStart('whs_a', clock, true),
    ]);
    assert.deepEqual([a, b, reads], [null, null, ['whs_a']]);
    stored = new Date(5_000).toISOString();
    nowMs = STORED_HOLD_READ_MS - 1;
    assert.equal(await holds.atStart('whs_a', clock, true), null, 'within the window');
    nowMs = STORED_HOLD_READ_MS;
    assert.equal(await holds.atStart('whs_a', clock, true), 5_000);
    assert.equal(await holds.atStart('whs_b', clock, true), 5_000);
    assert.deepEqual(reads, ['whs_a', 'whs_a', 'whs_b']);
    // A stored hold read is held here too: the next start needs no read.
    assert.equal(await holds.atStart('whs_a', clock, true), 5_000);
    assert.deepEqual(holds.held(nowMs), ['whs_a', 'whs_b']);
    nowMs = 5_000;
    failing = true;
    assert.equal(await holds.atStart('whs_a', clock, true), null);
    assert.equal(reads.length, 4);
  });

  it('lets a stored hold go that has passed once the read answers', async () => {
    let nowMs = 0;
    const clock = { now: () => new Date(nowMs) };
    const holds = new Holds(async () => {
      nowMs = 2_000;
      return new Date(1_000).toISOString();
    });
    assert.equal(await holds.atStart('whs_a', clock, true), null);
    assert.deepEqual(holds.held(nowMs), []);
  });
});
