import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { LinkPool } from './broker-pool.ts';

/** A pool of numbered links that records what it opened and closed. */
function pool(idleMs = 60_000) {
  const opened: number[] = [];
  /** Links the broker closed. */
  const broken = new Set<number>();
  const closed: number[] = [];
  let next = 0;
  const links = new LinkPool<number>({
    idleMs,
    close: async (link) => {
      closed.push(link);
    },
    isClosed: (link) => broken.has(link),
  });
  const open = async () => {
    const link = ++next;
    opened.push(link);
    return link;
  };
  return { links, open, opened, closed, broken };
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

  it('drops and closes a failed link at once, but not a newer one under the same key', async () => {
    const { links, open, closed } = pool();
    const first = await links.get('x', open);
    links.drop('x', first);
    const second = await links.get('x', open);
    assert.notEqual(second, first, 'the next get opens another at once');
    links.drop('x', first);
    assert.equal(await links.get('x', open), second);
    await links.close();
    assert.deepEqual(closed, [first, second]);
  });

  it('live: a link closed since its last use is replaced before the attempt uses it', async () => {
    const { links, open, closed, broken } = pool();
    const first = await links.live('x', open);
    assert.equal(await links.live('x', open), first);
    broken.add(first);
    const second = await links.live('x', open);
    assert.notEqual(second, first);
    assert.deepEqual(closed, [first]);
    await links.close();
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
