import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BoundedMap } from './bounded-map.ts';

describe('BoundedMap', () => {
  it('remembers a value and returns it, and clears itself once full before the next', () => {
    const map = new BoundedMap<string, number>(2);
    assert.equal(map.remember('a', 1), 1);
    assert.equal(map.remember('b', 2), 2);
    assert.deepEqual(
      [...map],
      [
        ['a', 1],
        ['b', 2],
      ],
    );
    assert.equal(map.remember('c', 3), 3);
    assert.deepEqual([...map], [['c', 3]]);
  });
});
