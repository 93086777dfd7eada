import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { mostWithin } from '../../test/helpers/attempt-log.ts';
import { paceIntervalUs, paceSlots, paceTurn, RecentStarts } from './pace.ts';
import { PACE_LATE_MS } from './pace-sql.ts';

/** A slot at the base margin. */
const at = (atMs: number) => ({ atMs, marginMs: PACE_LATE_MS });

describe('pace: maxPerSecond as evenly spaced send slots', () => {
  it('spaces slots so that no second holds more than the cap, even when starts run late', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1000 }),
        fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 12 }),
        fc.array(fc.integer({ min: 0, max: 5_000 }), { minLength: 12, maxLength: 12 }),
        fc.integer({ min: 0, max: 1_000_000 }),
        (perSecond, claims, gapsMs, seed) => {
          // Reservations as the queue makes them: each from the later of the schedule and now.
          let nextUs = 0;
          let nowUs = 1_700_000_000_000_000;
          const starts: number[] = [];
          for (const [i, count] of claims.entries()) {
            nowUs += gapsMs[i] * 1000;
            nextUs = Math.max(nextUs, nowUs) + count * paceIntervalUs(perSecond);
            for (const [k, slot] of paceSlots(nextUs, count, perSecond).entries()) {
              // Any lateness the check lets through, spread by the seed.
              const late = ((seed + k * 7919) % (PACE_LATE_MS * 1000 + 1)) / 1000;
              assert.equal(paceTurn(at(slot), slot + late, [], perSecond, false), 'go');
              starts.push(Math.floor(slot + late));
            }
          }
          assert.ok(mostWithin(starts, 1_000) <= perSecond);
        },
      ),
      { seed: 34, numRuns: 300 },
    );
  });

  it('keeps up with the cap: claims made back to back get slots one interval apart, no gap', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1000 }),
        fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 12 }),
        (perSecond, claims) => {
          // Each claim made while the last one's slots still run (the queue claims ahead).
          const nowUs = 1_700_000_000_000_000;
          let nextUs = 0;
          const slots: number[] = [];
          for (const count of claims) {
            nextUs = Math.max(nextUs, nowUs) + count * paceIntervalUs(perSecond);
            slots.push(...paceSlots(nextUs, count, perSecond));
          }
          // N sends take (N - 1) intervals: the cap, less only the lateness margin per interval.
          const intervalMs = paceIntervalUs(perSecond) / 1000;
          for (let i = 1; i < slots.length; i++) {
            assert.ok(Math.abs(slots[i] - slots[i - 1] - intervalMs) < 1e-3, `slot ${i}`);
          }
          assert.ok(intervalMs <= (1000 + PACE_LATE_MS) / perSecond + 1e-3);
        },
      ),
      { seed: 35, numRuns: 300 },
    );
  });

  it('waits before its slot; beside other workers goes within PACE_LATE_MS after it', () => {
    assert.equal(paceTurn(at(1_000), 999, [], 5, false), 1_000);
    assert.equal(paceTurn(at(1_000), 1_000, [], 5, false), 'go');
    assert.equal(paceTurn(at(1_000), 1_000 + PACE_LATE_MS, [], 5, false), 'go');
    assert.equal(paceTurn(at(1_000), 1_001 + PACE_LATE_MS, [], 5, false), 'late');
    // A slot of a widened margin.
    assert.equal(paceTurn({ atMs: 1_000, marginMs: 300 }, 1_300, [], 5, false), 'go');
    // Alone, however late; but never a second start within a second of a cap of one.
    assert.equal(paceTurn(at(1_000), 60_000, [], 5, true), 'go');
    assert.equal(paceTurn(at(1_000), 1_500, [900], 1, true), 1_900);
    assert.equal(paceTurn(at(1_000), 1_900, [900], 1, true), 'go');
  });

  it('alone, keeps the cap and starts every attempt however late the event loop runs', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 50 }),
        fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 8 }),
        fc.array(fc.integer({ min: 0, max: 2_000 }), { minLength: 8, maxLength: 8 }),
        fc.array(fc.integer({ min: 0, max: 600 }), { minLength: 1, maxLength: 50 }),
        (perSecond, claims, gapsMs, lagsMs) => {
          // Each slot's timer fires late by a lag that varies from start to start, as a loaded
          // event loop's do; every wait paceTurn asks for is late again.
          const recent = new RecentStarts();
          let nextUs = 0;
          let nowMs = 1_700_000_000_000;
          let k = 0;
          const starts: number[] = [];
          for (const [i, count] of claims.entries()) {
            nowMs += gapsMs[i];
            nextUs = Math.max(nextUs, nowMs * 1000) + count * paceIntervalUs(perSecond);
            for (const slot of paceSlots(nextUs, count, perSecond)) {
              let wakeAt = slot;
              for (;;) {
                nowMs = Math.floor(Math.max(nowMs, wakeAt + lagsMs[k++ % lagsMs.length]));
                const turn = paceTurn(at(slot), nowMs, recent.of('whs_a', nowMs), perSecond, true);
                assert.notEqual(turn, 'late');
                if (turn === 'go') break;
                wakeAt = turn as number;
              }
              recent.add('whs_a', nowMs, perSecond);
              starts.push(nowMs);
            }
          }
          assert.ok(mostWithin(starts, 1_000) <= perSecond);
        },
      ),
      { seed: 36, numRuns: 300 },
    );
  });

  it('remembers starts exactly for as long as they count, whatever the number of subscriptions', () => {
    const recent = new RecentStarts();
    for (let i = 0; i < 5_000; i++) recent.add(`whs_${i}`, 10_000 + i / 10, 3);
    assert.deepEqual(recent.of('whs_0', 10_999), [10_000]);
    assert.deepEqual(recent.of('whs_0', 11_000), []);
    recent.add('whs_x', 20_000, 2);
    recent.add('whs_x', 20_100, 2);
    recent.add('whs_x', 20_200, 2);
    assert.deepEqual(recent.of('whs_x', 20_300), [20_100, 20_200]);
  });

  it('hands out the slots just before the next free one, oldest first', () => {
    const interval = paceIntervalUs(5);
    assert.deepEqual(
      paceSlots(10 * interval, 3, 5),
      [7, 8, 9].map((k) => (k * interval) / 1000),
    );
  });
});
