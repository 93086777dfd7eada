import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import { describe, it } from 'node:test';
import { Worker } from 'node:worker_threads';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { LeasedLimiter, type Take } from '../src/rate-limit/leased-limiter.ts';
import { HUNG_AFTER_MS, until } from './helpers/until.ts';

/** Counts the store's consume calls, so a test can see which takes went to it. */
function countingStore(points: number, duration = 60) {
  const store = new RateLimiterMemory({ points, duration });
  const calls = { consume: 0, points: 0 };
  const consume = store.consume.bind(store);
  store.consume = (key, taken = 1, options) => {
    calls.consume += 1;
    calls.points += Number(taken);
    return consume(key, taken, options);
  };
  return { store, calls };
}

const settle = (take: Take | Promise<Take>) => Promise.resolve(take);

describe('LeasedLimiter', () => {
  it('allows exactly the limit in one process, with Remaining counting down by one', async () => {
    const { store, calls } = countingStore(200);
    const limiter = new LeasedLimiter(store);
    try {
      const remaining: number[] = [];
      let allowed = 0;
      for (let i = 0; i < 260; i++) {
        const take = await settle(limiter.take('t'));
        if (take.allowed) {
          allowed += 1;
          remaining.push(take.remaining);
        }
      }
      assert.equal(allowed, 200);
      assert.deepEqual(
        remaining,
        Array.from({ length: 200 }, (_, i) => 199 - i),
      );
      // Leases spared the store most of the round trips, and refusals after the first cost none.
      assert.ok(calls.consume < 60, `${calls.consume} store calls`);
    } finally {
      limiter.close();
    }
  });

  it('answers from the lease synchronously', async () => {
    const { store } = countingStore(1000);
    const limiter = new LeasedLimiter(store);
    try {
      await settle(limiter.take('t'));
      await settle(limiter.take('t')); // the second window take leases a chunk
      assert.ok(!(limiter.take('t') instanceof Promise));
    } finally {
      limiter.close();
    }
  });

  it('concurrent takes share one refill and still allow exactly the limit', async () => {
    const { store } = countingStore(50);
    const limiter = new LeasedLimiter(store);
    try {
      const takes = await Promise.all(Array.from({ length: 80 }, () => settle(limiter.take('t'))));
      assert.equal(takes.filter((t) => t.allowed).length, 50);
    } finally {
      limiter.close();
    }
  });

  it('two processes over one store never exceed the limit and lose little of it', async () => {
    const { store } = countingStore(400);
    const a = new LeasedLimiter(store);
    const b = new LeasedLimiter(store);
    try {
      let allowed = 0;
      for (let i = 0; i < 800; i++) {
        const take = await settle((i % 3 === 0 ? a : b).take('t'));
        if (take.allowed) allowed += 1;
      }
      assert.ok(allowed <= 400, `${allowed} allowed`);
      // A process's unspent lease is at most 1/8 of what was left when it took it.
      assert.ok(allowed >= 350, `${allowed} allowed`);
    } finally {
      a.close();
      b.close();
    }
  });

  it("sizes a busy key's chunks to its rate, and keeps a quiet key's small", async () => {
    let now = 1_000_000;
    const { store, calls } = countingStore(10_000_000);
    const limiter = new LeasedLimiter(store, { now: () => now });
    try {
      // 20,000 requests at 10 a millisecond: chunks of about 100 ms of traffic (1,000 points).
      for (let i = 0; i < 20_000; i++) {
        assert.equal((await settle(limiter.take('busy'))).allowed, true);
        now += 0.1;
      }
      assert.ok(calls.consume <= 30, `${calls.consume} store calls for the busy key`);
      // No more taken than 100 ms of its traffic beyond what it spent.
      assert.ok(calls.points - 20_000 <= 1_000, `${calls.points - 20_000} points unspent`);

      // One request every 10 ms: chunks stay at 16 points.
      calls.consume = 0;
      calls.points = 0;
      for (let i = 0; i < 200; i++) {
        assert.equal((await settle(limiter.take('quiet'))).allowed, true);
        now += 10;
      }
      assert.ok(calls.points - 200 < 16, `${calls.points - 200} points unspent`);
      assert.ok(calls.consume >= 200 / 16, `${calls.consume} store calls for the quiet key`);
    } finally {
      limiter.close();
    }
  });

  it('refuses with the store window, then counts again in the next window', async () => {
    let now = 1_000_000;
    const { store } = countingStore(3, 1);
    const limiter = new LeasedLimiter(store, { now: () => now });
    try {
      for (let i = 0; i < 3; i++) assert.equal((await settle(limiter.take('t'))).allowed, true);
      const refused = await settle(limiter.take('t'));
      assert.equal(refused.allowed, false);
      assert.ok(refused.msBeforeNext > 0 && refused.msBeforeNext <= 1000);
      // Locally blocked until the window ends: synchronous refusals.
      const again = limiter.take('t');
      assert.ok(!(again instanceof Promise) && !again.allowed);
      await new Promise((resolve) => setTimeout(resolve, 1_050));
      now += 1_050;
      assert.equal((await settle(limiter.take('t'))).allowed, true);
    } finally {
      limiter.close();
    }
  });

  it("leases the whole rest of the window when the store is the process's own, still exact", async () => {
    const { store, calls } = countingStore(1000);
    const limiter = new LeasedLimiter(store, { exclusive: true });
    try {
      let allowed = 0;
      let last = Number.POSITIVE_INFINITY;
      for (let i = 0; i < 1100; i++) {
        const take = await settle(limiter.take('t'));
        if (!take.allowed) continue;
        allowed += 1;
        assert.equal(take.remaining, last === Number.POSITIVE_INFINITY ? 999 : last - 1);
        last = take.remaining;
      }
      assert.equal(allowed, 1000);
      // The first take, the rest of the window, the refusal: then refusals are local.
      assert.equal(calls.consume, 3);
      assert.ok(!(limiter.take('t') instanceof Promise));
    } finally {
      limiter.close();
    }
  });

  it('keeps keys apart', async () => {
    const { store } = countingStore(2);
    const limiter = new LeasedLimiter(store);
    try {
      for (const key of ['a', 'a', 'b', 'b']) {
        assert.equal((await settle(limiter.take(key))).allowed, true);
      }
      assert.equal((await settle(limiter.take('a'))).allowed, false);
      assert.equal((await settle(limiter.take('b'))).allowed, false);
    } finally {
      limiter.close();
    }
  });
});

describe('LeasedLimiter beside a local count (a shared store that may be slow)', () => {
  /**
   * A store whose answers travel a loopback socket to a thread of their own and back, so they
   * arrive as I/O, also while this thread is busy; each waits `delayMs()` on the way. `written`
   * counts the answers in the kernel's hands (shared memory, readable while this thread blocks).
   */
  async function socketStore(points: number, delayMs: () => number) {
    const written = new Int32Array(new SharedArrayBuffer(4));
    const echo = new Worker(
      `const net = require('node:net');
      const { parentPort, workerData } = require('node:worker_threads');
      const server = net.createServer((socket) => {
        let text = '';
        socket.on('data', (data) => {
          text += data;
          for (let end = text.indexOf('\\n'); end >= 0; end = text.indexOf('\\n')) {
            setTimeout(() => socket.write('.', () => {
              Atomics.add(workerData, 0, 1);
              Atomics.notify(workerData, 0);
            }), Number(text.slice(0, end)));
            text = text.slice(end + 1);
          }
        });
      });
      server.listen(0, '127.0.0.1', () => parentPort.postMessage(server.address().port));`,
      { eval: true, workerData: written },
    );
    const [port] = await once(echo, 'message');
    const client = connect(port, '127.0.0.1');
    await once(client, 'connect');
    const waiting: Array<() => void> = [];
    client.on('data', (data) => {
      for (let i = 0; i < data.length; i++) waiting.shift()?.();
    });
    const store = new RateLimiterMemory({ points, duration: 60 });
    const calls = { consume: 0 };
    const consume = store.consume.bind(store);
    store.consume = async (key, taken, options) => {
      calls.consume += 1;
      await new Promise<void>((resolve) => {
        waiting.push(resolve);
        client.write(`${delayMs()}\n`);
      });
      return consume(key, taken, options);
    };
    const close = async () => {
      client.destroy();
      await echo.terminate();
    };
    return { store, calls, close, written };
  }

  it("takes a stall of the process's own event loop for no slow store", async () => {
    // The store refuses what the local count allows: the answer shows which one decided.
    const { store, close, written } = await socketStore(0, () => 0);
    const limiter = new LeasedLimiter(store, {
      local: new RateLimiterMemory({ points: 10, duration: 60 }),
      storeTimeoutMs: 50,
    });
    try {
      const take = settle(limiter.take('a'));
      await new Promise((resolve) => setImmediate(resolve));
      // This thread's event loop stalls past the time-out, and until the answer is on its way
      // however slowly the other thread gets to it: a loaded machine changes nothing.
      const stalledUntil = performance.now() + 150;
      Atomics.wait(written, 0, 0, HUNG_AFTER_MS);
      assert.equal(Atomics.load(written, 0), 1, 'the store answered');
      while (performance.now() < stalledUntil);
      assert.equal((await take).allowed, false);
    } finally {
      limiter.close();
      await close();
    }
  });

  it('answers from the local count when the store is slow, and asks the store again once it answers', async () => {
    let delay = 1_000;
    const { store, calls, close } = await socketStore(10, () => delay);
    const limiter = new LeasedLimiter(store, {
      local: new RateLimiterMemory({ points: 10, duration: 60 }),
      storeTimeoutMs: 50,
    });
    try {
      assert.equal((await settle(limiter.take('a'))).allowed, true);
      // The local count answered: the store has not counted `a` yet (its answer is a second out).
      assert.equal(await store.get('a'), null, 'the store answered first');
      delay = 0;
      // While the late answer is out, the store is avoided: `b` is counted here alone.
      assert.equal((await settle(limiter.take('b'))).allowed, true);
      assert.equal(calls.consume, 1);
      // The late answer came (the store counted `a`): the next key goes to the store again.
      await until(async () => ((await store.get('a'))?.consumedPoints === 1 ? true : undefined));
      assert.equal((await settle(limiter.take('c'))).allowed, true);
      assert.equal(calls.consume, 2);
      assert.equal((await store.get('c'))?.consumedPoints, 1);
    } finally {
      limiter.close();
      await close();
    }
  });
});
