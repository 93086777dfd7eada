import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ClaimOptions } from '../src/delivery/queue.ts';
import { abandonedBefore } from '../src/delivery/registry.ts';
import type { DeliveryOutcome } from '../src/delivery/types.ts';
import { BACKENDS, createTestContext, type TestContext } from './helpers/context.ts';
import { deliveryRows } from './helpers/delivery-rows.ts';
import { createTenant, type TenantFixture } from './helpers/fixtures.ts';

// The delivery queue's own statements: claims and fenced outcomes, on both backends.

/**
 * The worker settings these claims are made with: their aliveSince and staleBefore come from
 * abandonedBefore, as a worker's own do.
 */
const WEBHOOK = { timeoutMs: 2_000, leaseGraceMs: 60_000, workerDeadAfterMs: 10_000 };
const DEAD_AFTER_MS = WEBHOOK.workerDeadAfterMs;
/** What a worker at `now` takes for abandoned (see abandonedBefore). */
const abandonedAt = (now: string) => abandonedBefore(Date.parse(now), WEBHOOK);

const at = (ms: number) => new Date(Date.UTC(2030, 0, 1) + ms).toISOString();

for (const backend of BACKENDS) {
  describe(`delivery queue (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let subscriptionId: string;

    before(async () => {
      ctx = await createTestContext(backend, { env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' } });
      tenant = await createTenant(ctx, { tier: 'pro' });
      // No worker runs in this suite: the rows stay where the test puts them.
      const created = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: 'https://127.0.0.1:9/queue', events: ['client.created'] },
      });
      assert.equal(created.statusCode, 201, created.body);
      subscriptionId = created.json().data.id;
      // Wide open, so these tests see the queue alone (the limit has a test of its own).
      await repo().updateSubscription(tenant.id, subscriptionId, {
        maxConcurrency: 64,
        concurrencyLimit: 64,
      });
    });
    after(() => ctx.close());

    const repo = () => ctx.runtime.repositories.webhooks;
    const queue = () => ctx.runtime.queue;
    /**
     * A claim at `now` by worker `wkr_a` (or `options.workerId`), taking over the claims of workers
     * whose heartbeat is DEAD_AFTER_MS older than `now`.
     */
    const claimDue = (now: string, limit: number, options: Partial<ClaimOptions> = {}) =>
      queue().claim(new Date(now), limit, {
        workerId: 'wkr_a',
        ...abandonedAt(now),
        rowsPerSubscription: limit,
        paceHorizonUs: 500_000,
        ...options,
      });
    const db = () => ctx.runtime.database.db;
    async function queued(count: number): Promise<void> {
      for (let i = 0; i < count; i++) {
        const response = await ctx.api('POST', '/api/v1/clients', {
          token: tenant.token,
          body: { kind: 'individual', displayName: `Q${i}` },
        });
        assert.equal(response.statusCode, 201);
      }
    }
    const rows = () =>
      deliveryRows(db())
        .selectAll()
        .where('subscriptionId', '=', subscriptionId)
        .orderBy('id')
        .execute();
    async function reset(): Promise<void> {
      await db().deleteFrom('webhookDeliveries').execute();
      await db().deleteFrom('webhookWorkers').execute();
      // The claiming worker beats for as long as any test's clock runs.
      await queue().joinWorker('wkr_a', at(10_000_000));
    }

    it('claims each due row once, counting the attempt, with what sending needs', async () => {
      await reset();
      await queued(5);
      const now = at(0);
      const [a, b] = await Promise.all([claimDue(now, 3), claimDue(now, 3)]);
      const ids = [...a, ...b].map((d) => d.id);
      assert.equal(ids.length, 5);
      assert.equal(new Set(ids).size, 5, 'no row claimed twice');
      for (const d of [...a, ...b]) {
        assert.equal(d.attempts, 1);
        assert.equal(d.claimedAt, now);
        assert.equal(d.url, 'https://127.0.0.1:9/queue');
        assert.equal(JSON.parse(d.data).displayName.startsWith('Q'), true);
      }
      assert.deepEqual(await claimDue(now, 10), [], 'nothing left');
    });

    it("keeps each subscription within its concurrency limit, counting every claim's rows", async () => {
      await reset();
      await queued(5);
      const limit = { concurrencyLimit: 2 };
      await repo().updateSubscription(tenant.id, subscriptionId, limit);
      try {
        const first = await claimDue(at(0), 10);
        assert.equal(first.length, 2);
        assert.ok(first.every((d) => d.concurrencyLimit === 2));
        // Another worker's claim sees the two in flight.
        assert.deepEqual(await claimDue(at(0), 10), []);
        // One settled but not recorded yet frees its slot for the worker that settled it.
        const [settled] = first;
        const again = await claimDue(at(0), 10, {
          rowsPerSubscription: 10,
          settled: [settled.id],
        });
        assert.equal(again.length, 1);
        // Within a lowered ceiling too.
        await repo().updateSubscription(tenant.id, subscriptionId, {
          concurrencyLimit: 64,
          maxConcurrency: 4,
        });
        const rest = await claimDue(at(0), 10);
        assert.equal(rest.length, 1, 'three in flight, a ceiling of four');
        assert.equal(rest[0].concurrencyLimit, 4);
      } finally {
        await repo().updateSubscription(tenant.id, subscriptionId, {
          maxConcurrency: 64,
          concurrencyLimit: 64,
        });
      }
    });

    it("takes a claim over once its worker's heartbeat stops, and fences the old claim out", async () => {
      await reset();
      await queued(1);
      await queue().joinWorker('wkr_dead', at(0));
      const [first] = await claimDue(at(0), 10, { workerId: 'wkr_dead' });
      // However old the claim, its worker beats: never taken.
      await queue().heartbeat('wkr_dead', at(600_000));
      assert.deepEqual(await claimDue(at(600_000 + DEAD_AFTER_MS), 10), [], 'its worker lives');
      const [second] = await claimDue(at(600_001 + DEAD_AFTER_MS), 10);
      assert.equal(second.id, first.id);
      assert.equal(second.attempts, 1, 'the attempt cut off is sent again, not counted');
      const [row0] = await rows();
      assert.equal(row0.claimedBy, 'wkr_a');

      const outcome = (claimedAt: string, status: number): DeliveryOutcome => ({
        id: first.id,
        claimedAt,
        status: 'success',
        attempts: 1,
        lastResponseStatus: status,
        lastError: null,
        nextAttemptAt: null,
        deliveredAt: at(700_000),
      });
      // The dead worker's late answer changes nothing; the live claim's settles the row.
      await ctx.runtime.database.withTransaction(() =>
        queue().recordOutcomes([outcome(first.claimedAt, 201)]),
      );
      let [row] = await rows();
      assert.equal(row.status, 'in_flight');
      assert.equal(row.lastResponseStatus, null);
      await ctx.runtime.database.withTransaction(() =>
        queue().recordOutcomes([outcome(second.claimedAt, 202)]),
      );
      [row] = await rows();
      assert.equal(row.status, 'success');
      assert.equal(row.lastResponseStatus, 202);
      assert.equal(row.claimedAt, null);
      assert.equal(row.claimedBy, null);
      assert.equal(row.deliveredAt, at(700_000));
    });

    it('takes over at once the claims of a worker that left the registry', async () => {
      await reset();
      await queued(1);
      await queue().joinWorker('wkr_gone', at(0));
      const [first] = await claimDue(at(0), 10, { workerId: 'wkr_gone' });
      assert.deepEqual(await claimDue(at(1), 10), [], 'its worker lives');
      await queue().forgetWorkers({ id: 'wkr_gone' });
      const [second] = await claimDue(at(2), 10);
      assert.equal(second.id, first.id);
    });

    it('takes over a claim older than the registry (no worker) once the lease has passed', async () => {
      await reset();
      await queued(1);
      const [first] = await claimDue(at(0), 10);
      await db().updateTable('webhookQueue').set({ claimedBy: null }).execute();
      assert.deepEqual(await claimDue(at(61_000), 10), [], 'still leased');
      const [second] = await claimDue(at(63_000), 10);
      assert.equal(second.id, first.id);
    });

    it('gives back the claims of a worker that it does not hold (an answer it never got)', async () => {
      await reset();
      await queued(3);
      const claimed = await claimDue(at(0), 10);
      assert.equal(claimed.length, 3);
      const [kept] = claimed;
      assert.equal(await queue().giveBackUnknown('wkr_a', [kept.id], at(1)), 2);
      const byId = new Map((await rows()).map((r) => [r.id, r]));
      assert.equal(byId.get(kept.id)?.status, 'in_flight');
      for (const other of claimed.slice(1)) {
        const row = byId.get(other.id);
        assert.equal(row?.status, 'pending');
        assert.equal(row?.attempts, 0, 'the attempt uncounted');
        assert.equal(row?.claimedBy, null);
      }
    });

    it('gives claims back in a batch, uncounted, only while each claim is still its own', async () => {
      await reset();
      await queued(2);
      const [mine, taken] = await claimDue(at(0), 10);
      await ctx.runtime.database.withTransaction(() =>
        queue().record({
          givenBack: [
            { id: mine.id, claimedAt: mine.claimedAt, nextAttemptAt: at(5_000) },
            // Claimed again since (another claim time): not this batch's to give back.
            { id: taken.id, claimedAt: at(-1), nextAttemptAt: at(5_000) },
          ],
          outcomes: [],
          attempts: [],
          subscriptionIds: [],
        }),
      );
      const byId = new Map((await rows()).map((r) => [r.id, r]));
      const given = byId.get(mine.id);
      assert.deepEqual(
        [given?.status, given?.attempts, given?.nextAttemptAt, given?.claimedAt, given?.claimedBy],
        ['pending', 0, at(5_000), null, null],
      );
      const kept = byId.get(taken.id);
      assert.deepEqual([kept?.status, kept?.attempts], ['in_flight', 1]);
    });

    it('sends a claim lost with its worker again under the same attempt, whatever its number', async () => {
      await reset();
      await queued(1);
      // On its last attempt of six: a lost attempt was never counted as made.
      const [row0] = await rows();
      await db()
        .updateTable('webhookQueue')
        .set({ attempts: 5 })
        .where('deliveryId', '=', row0.id)
        .execute();
      await queue().joinWorker('wkr_dead', at(0));
      const [lost] = await claimDue(at(0), 10, { workerId: 'wkr_dead' });
      assert.equal(lost.attempts, 6);
      const later = at(1 + DEAD_AFTER_MS);
      const { aliveSince, staleBefore } = abandonedAt(later);
      assert.deepEqual(await queue().crashLoops('wkr_a', aliveSince, staleBefore, 10), []);
      const [again] = await claimDue(later, 10);
      assert.equal(again.id, lost.id);
      assert.equal(again.attempts, 6, 'the same attempt, sent again');
      const [row] = await rows();
      assert.equal(row.status, 'in_flight');
      assert.equal(row.claimedBy, 'wkr_a');
      assert.equal(row.workerLosses, 1);
    });

    it('dead-letters a crash loop (three losses in a row) as worker_lost, its attempt uncounted', async () => {
      await reset();
      await queued(2);
      const [loop, healed] = await rows();
      let now = 0;
      /** Claims both rows by a worker that then dies; the next claim is DEAD_AFTER_MS later. */
      async function dies(worker: string) {
        await queue().joinWorker(worker, at(now));
        const taken = await claimDue(at(now), 10, { workerId: worker });
        now += DEAD_AFTER_MS + 1;
        return taken;
      }
      await dies('wkr_1');
      await dies('wkr_2');
      // The second row gets an attempt recorded between its losses: not a loop.
      const [h] = (await claimDue(at(now), 10)).filter((d) => d.id === healed.id);
      await ctx.runtime.database.withTransaction(() =>
        queue().recordOutcomes([
          {
            id: h.id,
            claimedAt: h.claimedAt,
            attempts: h.attempts,
            status: 'pending',
            lastResponseStatus: 500,
            lastError: null,
            nextAttemptAt: at(now),
            deliveredAt: null,
          },
        ]),
      );
      // The first row was taken by wkr_a along with it: a worker that dies too.
      await db()
        .updateTable('webhookQueue')
        .set({ claimedBy: 'wkr_3' })
        .where('deliveryId', '=', loop.id)
        .execute();
      now += DEAD_AFTER_MS + 1;
      /** Each crash loop found, dead-lettered (as the recorder does, one row at a time). */
      const deadLetter = async () => {
        const { aliveSince, staleBefore } = abandonedAt(at(now));
        const dead = [];
        for (const id of await queue().crashLoops('wkr_a', aliveSince, staleBefore, 10)) {
          const row = await queue().deadLetterAbandoned(id, 'wkr_a', aliveSince, staleBefore);
          if (row) dead.push(row);
        }
        assert.equal(
          await queue().deadLetterAbandoned(loop.id, 'wkr_a', aliveSince, staleBefore),
          undefined,
          'a row dead-lettered is no longer a crash loop',
        );
        return dead;
      };
      const dead = await deadLetter();
      assert.deepEqual(
        dead.map((d) => [d.id, d.attempts]),
        [[loop.id, 0]],
      );
      const byId = new Map((await rows()).map((r) => [r.id, r]));
      const row = byId.get(loop.id);
      assert.equal(row?.status, 'dead_letter');
      assert.equal(row?.lastError, 'worker_lost');
      assert.equal(row?.attempts, 0, 'its first attempt, sent three times, never counted as made');
      assert.equal(row?.claimedAt, null);
      assert.equal(row?.workerLosses, 3);
      const other = byId.get(healed.id);
      assert.equal(other?.workerLosses, 0, 'a recorded attempt ends the run of losses');
      assert.equal(other?.attempts, 1);
      assert.equal((await deadLetter()).length, 0);
    });

    it('claims half a second of sends of a capped subscription, at least one row', async () => {
      try {
        for (const [perSecond, rows] of [
          [1, 1],
          [5, 3],
          [20, 10],
        ]) {
          await reset();
          await db().deleteFrom('webhookPacing').execute();
          await queued(12);
          await repo().updateSubscription(tenant.id, subscriptionId, { maxPerSecond: perSecond });
          assert.equal((await claimDue(at(0), 50)).length, rows, `maxPerSecond ${perSecond}`);
        }
      } finally {
        await repo().updateSubscription(tenant.id, subscriptionId, { maxPerSecond: null });
      }
    });

    it('records a mixed batch in one go: retries, dead letters, successes', async () => {
      await reset();
      await queued(3);
      const claimed = await claimDue(at(0), 10);
      const [retry, dead, ok] = claimed.sort((x, y) => x.id.localeCompare(y.id));
      await ctx.runtime.database.withTransaction(() =>
        queue().recordOutcomes([
          {
            id: retry.id,
            claimedAt: retry.claimedAt,
            attempts: retry.attempts,
            status: 'pending',
            lastResponseStatus: null,
            lastError: null,
            nextAttemptAt: at(60_000),
            deliveredAt: null,
          },
          {
            id: dead.id,
            claimedAt: dead.claimedAt,
            attempts: dead.attempts,
            status: 'dead_letter',
            lastResponseStatus: 500,
            lastError: null,
            nextAttemptAt: null,
            deliveredAt: null,
          },
          {
            id: ok.id,
            claimedAt: ok.claimedAt,
            attempts: ok.attempts,
            status: 'success',
            lastResponseStatus: 200,
            lastError: null,
            nextAttemptAt: null,
            deliveredAt: at(1),
          },
        ]),
      );
      const after = await rows();
      assert.deepEqual(
        after.map((r) => [r.status, r.lastResponseStatus, r.nextAttemptAt, r.claimedAt]),
        [
          ['pending', null, at(60_000), null],
          ['dead_letter', 500, null, null],
          ['success', 200, null, null],
        ],
      );
      // The retry is due again at its time, not before.
      assert.deepEqual(await claimDue(at(59_000), 10), []);
      const [again] = await claimDue(at(60_000), 10);
      assert.equal(again.id, retry.id);
      assert.equal(again.attempts, 2);
    });

    it("takes at most rowsPerSubscription rows of each subscription: one's backlog cannot starve another", async () => {
      await reset();
      await queued(12);
      // A second subscription, created after the twelve: only the last two events reach it.
      const other = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: 'https://127.0.0.1:9/other', events: ['client.created'] },
      });
      assert.equal(other.statusCode, 201, other.body);
      const otherId = other.json().data.id;
      await queued(2);
      const claimed = await claimDue(at(0), 10, { rowsPerSubscription: 4 });
      const count = (id: string) => claimed.filter((d) => d.subscriptionId === id).length;
      assert.equal(count(subscriptionId), 4);
      assert.equal(count(otherId), 2, 'the later rows of the other subscription are claimed too');
      assert.equal(claimed.length, 6);
      const removed = await ctx.api('DELETE', `/api/v1/webhooks/${otherId}`, {
        token: tenant.token,
      });
      assert.equal(removed.statusCode, 204);
    });

    it('keeps the last status the endpoint answered with through attempts that got no answer', async () => {
      await reset();
      await queued(1);
      const settle = async (at0: number, lastResponseStatus: number | null) => {
        const [claim] = await claimDue(at(at0), 10);
        await ctx.runtime.database.withTransaction(() =>
          queue().recordOutcomes([
            {
              id: claim.id,
              claimedAt: claim.claimedAt,
              attempts: claim.attempts,
              status: 'pending',
              lastResponseStatus,
              lastError: null,
              nextAttemptAt: at(at0 + 1),
              deliveredAt: null,
            },
          ]),
        );
      };
      await settle(0, null);
      assert.equal((await rows())[0].lastResponseStatus, null, 'no answer yet');
      await settle(10, 503);
      await settle(20, null);
      assert.equal((await rows())[0].lastResponseStatus, 503);
      await settle(30, 429);
      assert.equal((await rows())[0].lastResponseStatus, 429);
    });

    it('skips paused subscriptions and the ones the worker has enough of', async () => {
      await reset();
      await queued(2);
      assert.deepEqual(
        await claimDue(at(0), 10, {
          rowsPerSubscription: 10,
          skip: [subscriptionId],
        }),
        [],
      );
      await db()
        .updateTable('webhookSubscriptions')
        .set({ active: false })
        .where('id', '=', subscriptionId)
        .execute();
      assert.deepEqual(await claimDue(at(0), 10), []);
      await db()
        .updateTable('webhookSubscriptions')
        .set({ active: true })
        .where('id', '=', subscriptionId)
        .execute();
      assert.equal((await claimDue(at(0), 10)).length, 2);
    });
  });
}
