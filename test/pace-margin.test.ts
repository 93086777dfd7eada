import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import fc from 'fast-check';
import { paceSlots, paceTurn, raisedMarginUs } from '../src/delivery/pace.ts';
import {
  PACE_LATE_DECAY_MS,
  PACE_LATE_MAX_MS,
  PACE_LATE_MS,
  raisePaceMargin,
  reservePace,
} from '../src/delivery/pace-sql.ts';
import { mostWithin } from './helpers/attempt-log.ts';
import { createTestContext, describeEachBackend, type TestContext } from './helpers/context.ts';
import { createSubscription, createTenant } from './helpers/fixtures.ts';

// The pace schedule's statements (reserve, widen the margin) on a real database, on a clock of
// the test's own: beside other workers a start may be as late as its slot's margin, a later one
// widens the margin for the slots reserved after it, and the margin narrows again after a quiet
// minute. Whatever the lateness, reservations and time jumps, no second holds more than the cap.

describeEachBackend('pace margins on the shared schedule', (backend) => {
  let ctx: TestContext;
  let subscriptionId: (perSecond: number) => Promise<string>;

  before(async () => {
    ctx = await createTestContext(backend, { env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' } });
    const tenant = await createTenant(ctx, { tier: 'enterprise' });
    await ctx.admin('PATCH', `/admin/v1/tenants/${tenant.id}`, { webhookEndpointCap: 500 });
    subscriptionId = async (maxPerSecond) =>
      (await createSubscription(ctx, tenant, 'https://127.0.0.1:9/paced', { maxPerSecond })).data
        .id as string;
  });
  after(async () => {
    await ctx.close();
  });

  /** Reserves `rows` slots at `nowMs` the way a worker's claim does: its slots, with margins. */
  const reserve = async (id: string, perSecond: number, rows: number, nowMs: number) => {
    const reserved = await reservePace(ctx.runtime.database.db, nowMs * 1000, [
      { subscriptionId: id, rows, perSecond },
    ]);
    const { nextSlotUs, marginUs } = reserved.get(id) as { nextSlotUs: number; marginUs: number };
    return paceSlots(nextSlotUs, rows, perSecond, marginUs).map((atMs) => ({
      atMs,
      marginMs: marginUs / 1000,
    }));
  };

  it('never lets a second hold more than the cap, however late the starts beside others', async () => {
    const subscriptions = new Map<number, string>();
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 40 }),
        fc.array(
          fc.record({
            rows: fc.integer({ min: 1, max: 20 }),
            // Back to back, or seconds apart (a slow schedule still runs then: a margin can
            // narrow under slots spaced for the wider one), or past a quiet minute.
            gapMs: fc.oneof(
              fc.integer({ min: 0, max: 1_500 }),
              fc.integer({ min: 5_000, max: 20_000 }),
              fc.constant(PACE_LATE_DECAY_MS + 1_000),
            ),
            // Each start's lateness as a share of its slot's margin (up to all of it: it goes),
            // and whether the claim's first start comes later than that (it widens the margin).
            shares: fc.array(fc.integer({ min: 0, max: 1000 }), { minLength: 20, maxLength: 20 }),
            overshootMs: fc.oneof(
              { weight: 3, arbitrary: fc.constant(0) },
              fc.integer({ min: 1, max: PACE_LATE_MAX_MS }),
            ),
          }),
          { minLength: 1, maxLength: 25 },
        ),
        async (perSecond, claims) => {
          // One subscription per cap, its schedule started afresh each run.
          const id = subscriptions.get(perSecond) ?? (await subscriptionId(perSecond));
          subscriptions.set(perSecond, id);
          await ctx.runtime.database.db
            .deleteFrom('webhookPacing')
            .where('subscriptionId', '=', id)
            .execute();
          // Events in time order: each claim reserves at its time; each of its starts comes at
          // its slot plus a lateness, and goes, or (too late) widens the margin at that moment.
          let nowMs = 1_800_000_000_000;
          const starts: Array<{ atMs: number; slot: { atMs: number; marginMs: number } }> = [];
          const started: number[] = [];
          const runUntil = async (untilMs: number) => {
            starts.sort((a, b) => a.atMs - b.atMs);
            while (starts.length > 0 && starts[0].atMs <= untilMs) {
              const start = starts.shift() as (typeof starts)[number];
              const turn = paceTurn(start.slot, start.atMs, [], perSecond, false);
              if (turn === 'go') started.push(start.atMs);
              else if (turn === 'late') {
                const margin = raisedMarginUs(start.atMs - start.slot.atMs);
                await raisePaceMargin(
                  ctx.runtime.database.db,
                  id,
                  margin,
                  Math.floor(start.atMs) * 1000,
                );
              } else assert.fail('a start before its slot');
            }
          };
          for (const claim of claims) {
            nowMs += claim.gapMs;
            await runUntil(nowMs);
            const slots = await reserve(id, perSecond, claim.rows, nowMs);
            for (const [i, slot] of slots.entries()) {
              const late = (slot.marginMs * claim.shares[i]) / 1000;
              const overshoot = i === 0 && claim.overshootMs > 0 ? claim.overshootMs + 1 : 0;
              starts.push({ atMs: slot.atMs + late + overshoot, slot });
            }
          }
          await runUntil(Number.POSITIVE_INFINITY);
          assert.ok(mostWithin(started, 1_000) <= perSecond, `${mostWithin(started)} in a second`);
        },
      ),
      { seed: 52, numRuns: 80 },
    );
  });

  it('widens the margin for a start later than it, so the next starts as late go', async () => {
    const id = await subscriptionId(10);
    let nowMs = 1_800_000_000_000;
    const first = await reserve(id, 10, 5, nowMs);
    assert.ok(first.every((slot) => slot.marginMs === PACE_LATE_MS));
    // Every start 150 ms late (an event loop that lags so): the first is given back and widens.
    const late = first[0];
    assert.equal(paceTurn(late, late.atMs + 150, [], 10, false), 'late');
    nowMs = late.atMs + 150;
    await raisePaceMargin(ctx.runtime.database.db, id, raisedMarginUs(150), nowMs * 1000);
    const next = await reserve(id, 10, 5, nowMs);
    assert.ok(next.every((slot) => slot.marginMs === 300));
    for (const slot of next) assert.equal(paceTurn(slot, slot.atMs + 150, [], 10, false), 'go');
    // Spaced for the wider margin: (1 s + 300 ms) / 10.
    assert.equal(Math.round(next[1].atMs - next[0].atMs), 130);
    // A quiet minute later it halves, the schedule moved on by the difference.
    nowMs += PACE_LATE_DECAY_MS + 1;
    const later = await reserve(id, 10, 1, nowMs);
    assert.equal(later[0].marginMs, 150);
    assert.ok(later[0].atMs >= nowMs + 150, `${later[0].atMs - nowMs} ms after now`);
  });
});
