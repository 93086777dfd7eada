import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { firstIdAt, newId } from './ids.ts';

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
