import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ClaimOptions } from '../src/delivery/queue.ts';
import { DEAD_AFTER_MS } from '../src/delivery/registry.ts';
import type { DeliveryOutcome } from '../src/delivery/types.ts';
import { BACKENDS, createTestContext, type TestContext } from './helpers/context.ts';
import { createTenant, type TenantFixture } from './helpers/fixtures.ts';

// The delivery queue's own statements: claims and fenced outcomes, on both backends.

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
        aliveSince: new Date(Date.parse(now) - DEAD_AFTER_MS).toISOString(),
        staleBefore: new Date(Date.parse(now) - 62_000).toISOString(),
        perSubscription: limit,
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
      db()
        .selectFrom('webhookDeliveries')
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
          perSubscription: 10,
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
      assert.equal(second.attempts, 2);
      const [row0] = await rows();
      assert.equal(row0.claimedBy, 'wkr_a');

      const outcome = (claimedAt: string, status: number): DeliveryOutcome => ({
        id: first.id,
        claimedAt,
        status: 'success',
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
      await db().updateTable('webhookDeliveries').set({ claimedBy: null }).execute();
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
      assert.equal(await queue().releaseUnheld('wkr_a', [kept.id], at(1)), 2);
      const byId = new Map((await rows()).map((r) => [r.id, r]));
      assert.equal(byId.get(kept.id)?.status, 'in_flight');
      for (const other of claimed.slice(1)) {
        const row = byId.get(other.id);
        assert.equal(row?.status, 'pending');
        assert.equal(row?.attempts, 0, 'the attempt uncounted');
        assert.equal(row?.claimedBy, null);
      }
    });

    it('dead-letters an abandoned claim on its last attempt instead of sending it again', async () => {
      await reset();
      await queued(2);
      await queue().joinWorker('wkr_dead', at(0));
      const [last, other] = await claimDue(at(0), 10, { workerId: 'wkr_dead' });
      await db()
        .updateTable('webhookDeliveries')
        .set({ attempts: 6 })
        .where('id', '=', last.id)
        .execute();
      // Its worker silent: only the row with attempts left is taken over.
      const later = at(1 + DEAD_AFTER_MS);
      const taken = await claimDue(later, 10, { perSubscription: 10, maxAttempts: 6 });
      assert.deepEqual(
        taken.map((d) => d.id),
        [other.id],
      );
      const aliveSince = at(1);
      assert.equal(
        (await queue().deadLetterAbandoned('wkr_a', aliveSince, at(-62_000), 6)).length,
        1,
      );
      const row = (await rows()).find((r) => r.id === last.id);
      assert.equal(row?.status, 'dead_letter');
      assert.equal(row?.attempts, 6);
      assert.equal(row?.claimedAt, null);
      assert.equal(
        (await queue().deadLetterAbandoned('wkr_a', aliveSince, at(-62_000), 6)).length,
        0,
      );
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
            status: 'pending',
            lastResponseStatus: null,
            lastError: null,
            nextAttemptAt: at(60_000),
            deliveredAt: null,
          },
          {
            id: dead.id,
            claimedAt: dead.claimedAt,
            status: 'dead_letter',
            lastResponseStatus: 500,
            lastError: null,
            nextAttemptAt: null,
            deliveredAt: null,
          },
          {
            id: ok.id,
            claimedAt: ok.claimedAt,
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

    it("takes at most perSubscription rows of each subscription: one's backlog cannot starve another", async () => {
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
      const claimed = await claimDue(at(0), 10, { perSubscription: 4 });
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
          perSubscription: 10,
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
