import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { after, describe, it } from 'node:test';
import { sql } from 'kysely';
import { createDatabase } from '../src/db/database.ts';
import { OutageBreaker, type Probe, ProbeConnection } from '../src/db/outage-breaker.ts';
import { runningNow, withDeadline } from '../src/lib/deadline.ts';
import { reaped } from './helpers/children.ts';

// A busy machine stalls a process: a long callback, or no core for it. Its timers then come due
// before its loop reads the answers that arrived meanwhile. Whatever judges an answer late (the
// outage breaker, a connection's, the readiness probe's, a delivery's, a lookup's or a store's
// time-out) counts running time and reads those answers first (src/lib/deadline.ts): here the
// loop is stalled, synchronously, while an answer arrives.

/** Stalls this process's event loop for `ms`, as a long callback does. */
const stall = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
const STALL_MS = 1_500;

describe('an answer that came while the loop was stalled is not late', () => {
  it('withDeadline: the answer wins over a deadline that passed during the stall', async () => {
    // Another process answers each line a tenth of a second after it reads it.
    const echo = reaped(
      spawn('sh', ['-c', 'while read line; do sleep 0.1; echo "$line"; done'], { detached: true }),
      { group: true },
    );
    after(() => process.kill(-(echo.pid as number)));
    const lines = echo.stdout as NodeJS.ReadableStream;
    for (const round of [1, 2, 3]) {
      const answered = once(lines, 'data').then(() => 'answered');
      await new Promise((written) => echo.stdin?.write(`${round}\n`, written));
      const outcome = withDeadline(answered, 50, () => 'late');
      // After this turn's poll: the answer arrives while the loop is stalled, the deadline passes.
      setImmediate(() => stall(STALL_MS));
      assert.equal(await outcome, 'answered', `round ${round}`);
    }
  });

  it('the outage breaker does not take a probe answered during the stall for an outage', {
    skip: process.env.TEST_DATABASE_URL ? false : 'TEST_DATABASE_URL is not set',
  }, async () => {
    const real = new ProbeConnection(process.env.TEST_DATABASE_URL as string, 500);
    let stalls = 0;
    // The real probe on a real server; the loop is stalled as soon as one goes out, so its
    // answer arrives during the stall.
    const probe: Probe = {
      ask(now, since) {
        const answer = real.ask(now, since);
        if (answer === 'waiting' && stalls === 0) {
          stalls += 1;
          setImmediate(() => stall(STALL_MS));
        }
        return answer;
      },
      close: () => real.close(),
    };
    // A statement waiting from the start: what makes the breaker probe, and then judge.
    const since = runningNow();
    const waits = { oldestWaitSince: () => since, cutWaits: () => undefined };
    const start = performance.now();
    const breaker = new OutageBreaker(probe, waits, {
      probeAfterMs: 500,
      outageAfterMs: 1_000,
      probeTimeoutMs: 500,
      checkEveryMs: 100,
    });
    after(() => breaker.close());
    let opened = false;
    // Until well past the stall: every check after it would open the breaker if it misread.
    while (performance.now() - start < 500 + STALL_MS + 1_000) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      opened ||= breaker.open;
    }
    assert.equal(stalls, 1, 'the loop was stalled once, with a probe out');
    assert.equal(opened, false, 'an answered probe is not an outage');
  });

  it('a PostgreSQL connection whose handshake completed during the stall is not a time-out', {
    skip: process.env.TEST_DATABASE_URL ? false : 'TEST_DATABASE_URL is not set',
  }, async () => {
    for (const round of [1, 2, 3]) {
      // A new pool each round: its first statement's connection is being made when the loop is
      // stalled past the connect time-out.
      const database = createDatabase({
        databaseUrl: process.env.TEST_DATABASE_URL as string,
        dataDir: '',
        connectTimeoutMs: 500,
      });
      try {
        const answer = sql<{ one: number }>`select 1 as one`.execute(database.db);
        setImmediate(() => stall(STALL_MS));
        assert.deepEqual((await answer).rows, [{ one: 1 }], `round ${round}`);
      } finally {
        await database.close();
      }
    }
  });
});
