import assert from 'node:assert/strict';
import { describe, it, mock } from 'node:test';
import pino from 'pino';
import { ManualClock } from '../../test/helpers/clock.ts';
import type { DeliveryQueue } from './queue.ts';
import { WorkerRegistry } from './registry.ts';

const DEAD_AFTER_MS = 10_000;
/** Five beats within WEBHOOK_WORKER_DEAD_AFTER. */
const BEAT_MS = DEAD_AFTER_MS / 5;

/** A registry over a queue whose heartbeat writes succeed while `beating` says so. */
function registry(clock: ManualClock, beating: { ok: boolean }) {
  const queue = {
    joinWorker: async () => undefined,
    otherLiveWorkers: async () => 0,
    forgetWorkers: async () => undefined,
    heartbeat: async () => {
      if (!beating.ok) throw new Error('connection refused');
      return true;
    },
  } as unknown as DeliveryQueue;
  return new WorkerRegistry({
    queue,
    clock,
    logger: pino({ level: 'silent' }),
    config: { webhook: { workerDeadAfterMs: DEAD_AFTER_MS } },
  });
}

/** Runs the registry's next beat: the interval fires, its statements settle. */
async function nextBeat(clock: ManualClock): Promise<void> {
  clock.advance(BEAT_MS);
  mock.timers.tick(BEAT_MS);
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

describe('a worker heartbeat that is late (the worker probe)', () => {
  it('is late before the worker joins, on time after, and late once half the dead-after passes without a beat recorded', async (t) => {
    mock.timers.enable({ apis: ['setInterval'] });
    t.after(() => mock.timers.reset());
    const clock = new ManualClock('2026-12-01T10:00:00Z');
    const beating = { ok: true };
    const worker = registry(clock, beating);
    assert.equal(worker.lateAt(clock.now().getTime()), true, 'not joined yet');
    await worker.join();
    const joined = clock.now().getTime();
    assert.equal(worker.lateAt(joined + DEAD_AFTER_MS / 2), false);
    assert.equal(worker.lateAt(joined + DEAD_AFTER_MS / 2 + 1), true);

    // Beats recorded keep it on time, however long it runs.
    for (let i = 0; i < 10; i++) await nextBeat(clock);
    assert.equal(worker.lateAt(clock.now().getTime() + BEAT_MS), false);

    // Beats that fail do not: two missed and a half, and it is late.
    beating.ok = false;
    const lastBeat = clock.now().getTime();
    await nextBeat(clock);
    await nextBeat(clock);
    assert.equal(worker.lateAt(clock.now().getTime()), false, 'two beats missed: not yet');
    assert.equal(worker.lateAt(lastBeat + DEAD_AFTER_MS / 2 + 1), true);
    beating.ok = true;
    await nextBeat(clock);
    assert.equal(worker.lateAt(clock.now().getTime()), false, 'recorded again');
    await worker.leave();
  });
});
