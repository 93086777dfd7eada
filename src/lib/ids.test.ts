import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { firstIdAt, newId } from './ids.ts';

describe('newId', () => {
  it('mints unique ids in creation order, with random parts that differ between milliseconds', async () => {
    const ids = Array.from({ length: 5_000 }, () => newId('cli'));
    assert.equal(new Set(ids).size, ids.length);
    assert.deepEqual([...ids].sort(), ids);
    const randomParts = new Set<string>();
    for (let i = 0; i < 20; i++) {
      randomParts.add(newId('cli').slice(-16));
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    assert.equal(randomParts.size, 20);
    // Every one of the 32 characters turns up in the random parts of a few thousand ids.
    const seen = new Set(ids.join('').replaceAll('cli_', ''));
    assert.equal(seen.size, 32);
  });
});

describe('firstIdAt', () => {
  it('orders below every id minted from that millisecond on, above every one before', async () => {
    const before = newId('dlv');
    await new Promise((resolve) => setTimeout(resolve, 5));
    const bound = firstIdAt('dlv', Date.now());
    const after = newId('dlv');
    assert.ok(before < bound, `${before} < ${bound}`);
    assert.ok(bound <= after, `${bound} <= ${after}`);
    assert.match(bound, /^dlv_[0-9A-HJKMNP-TV-Z]{26}$/);
  });
});
