import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { LinkPool } from './broker-pool.ts';

/** A pool of numbered links that records what it opened and closed. */
function pool(idleMs = 60_000) {
  const opened: number[] = [];
  const closed: number[] = [];
  let next = 0;
  const links = new LinkPool<number>({
    idleMs,
    close: async (link) => {
      closed.push(link);
    },
  });
  const open = async () => {
    const link = ++next;
    opened.push(link);
    return link;
  };
  return { links, open, opened, closed };
}

describe('LinkPool: one connection per destination', () => {
  it('shares one link, and one opening under way, among the attempts to a destination', async () => {
    const { links, open, opened } = pool();
    const [a, b] = await Promise.all([links.get('x', open), links.get('x', open)]);
    assert.equal(a, b);
    assert.equal(await links.get('x', open), a);
    assert.notEqual(await links.get('y', open), a, 'another destination, another link');
    assert.deepEqual(opened, [1, 2]);
    await links.close();
  });

  it('forgets an opening that failed, so the next attempt connects again', async () => {
    const { links, open } = pool();
    await assert.rejects(links.get('x', () => Promise.reject(new Error('refused'))));
    assert.equal(links.size, 0);
    assert.equal(await links.get('x', open), 1);
    await links.close();
  });

  it('drops and closes a failed link, but not a newer one under the same key', async () => {
    const { links, open, closed } = pool();
    const first = await links.get('x', open);
    links.drop('x', first);
    await sleep(0);
    assert.deepEqual(closed, [first]);
    const second = await links.get('x', open);
    links.drop('x', first);
    await sleep(0);
    assert.equal(await links.get('x', open), second);
    await links.close();
    assert.deepEqual(closed, [first, second]);
  });

  it('closes a link once unused for idleMs, and keeps one in use', async () => {
    const { links, open, closed } = pool(100);
    const idle = await links.get('idle', open);
    const busy = await links.get('busy', open);
    for (let i = 0; i < 6; i++) {
      await sleep(40);
      await links.get('busy', open);
    }
    assert.deepEqual(closed, [idle]);
    assert.equal(links.size, 1);
    await links.close();
    assert.deepEqual(closed, [idle, busy]);
  });
});
