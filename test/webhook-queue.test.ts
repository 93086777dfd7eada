import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { DeliveryOutcome } from '../src/repositories/webhooks-repository.ts';
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
    }

    it('claims each due row once, counting the attempt, with what sending needs', async () => {
      await reset();
      await queued(5);
      const now = at(0);
      const [a, b] = await Promise.all([
        repo().claimDue(now, at(-60_000), 3),
        repo().claimDue(now, at(-60_000), 3),
      ]);
      const ids = [...a, ...b].map((d) => d.id);
      assert.equal(ids.length, 5);
      assert.equal(new Set(ids).size, 5, 'no row claimed twice');
      for (const d of [...a, ...b]) {
        assert.equal(d.attempts, 1);
        assert.equal(d.claimedAt, now);
        assert.equal(d.url, 'https://127.0.0.1:9/queue');
        assert.equal(JSON.parse(d.data).displayName.startsWith('Q'), true);
      }
      assert.deepEqual(await repo().claimDue(now, at(-60_000), 10), [], 'nothing left');
    });

    it("keeps each subscription within its concurrency limit, counting every claim's rows", async () => {
      await reset();
      await queued(5);
      const limit = { concurrencyLimit: 2 };
      await repo().updateSubscription(tenant.id, subscriptionId, limit);
      try {
        const first = await repo().claimDue(at(0), at(-60_000), 10);
        assert.equal(first.length, 2);
        assert.ok(first.every((d) => d.concurrencyLimit === 2));
        // Another worker's claim sees the two in flight.
        assert.deepEqual(await repo().claimDue(at(0), at(-60_000), 10), []);
        // One settled but not recorded yet frees its slot for the worker that settled it.
        const [settled] = first;
        const again = await repo().claimDue(at(0), at(-60_000), 10, {
          perSubscription: 10,
          settled: [settled.id],
        });
        assert.equal(again.length, 1);
        // Within a lowered ceiling too.
        await repo().updateSubscription(tenant.id, subscriptionId, {
          concurrencyLimit: 64,
          maxConcurrency: 4,
        });
        const rest = await repo().claimDue(at(0), at(-60_000), 10);
        assert.equal(rest.length, 1, 'three in flight, a ceiling of four');
        assert.equal(rest[0].concurrencyLimit, 4);
      } finally {
        await repo().updateSubscription(tenant.id, subscriptionId, {
          maxConcurrency: 64,
          concurrencyLimit: 64,
        });
      }
    });

    it('takes a claim over only once it is stale, and fences the old claim out', async () => {
      await reset();
      await queued(1);
      const [first] = await repo().claimDue(at(0), at(-62_000), 10);
      assert.deepEqual(await repo().claimDue(at(61_000), at(-1_000), 10), [], 'still leased');
      const [second] = await repo().claimDue(at(63_000), at(1_000), 10);
      assert.equal(second.id, first.id);
      assert.equal(second.attempts, 2);

      const outcome = (claimedAt: string, status: number): DeliveryOutcome => ({
        id: first.id,
        claimedAt,
        status: 'success',
        lastResponseStatus: status,
        lastError: null,
        nextAttemptAt: null,
        deliveredAt: at(64_000),
      });
      // The dead worker's late answer changes nothing; the live claim's settles the row.
      await ctx.runtime.database.withTransaction(() =>
        repo().recordOutcomes([outcome(first.claimedAt, 201)]),
      );
      let [row] = await rows();
      assert.equal(row.status, 'in_flight');
      assert.equal(row.lastResponseStatus, null);
      await ctx.runtime.database.withTransaction(() =>
        repo().recordOutcomes([outcome(second.claimedAt, 202)]),
      );
      [row] = await rows();
      assert.equal(row.status, 'success');
      assert.equal(row.lastResponseStatus, 202);
      assert.equal(row.claimedAt, null);
      assert.equal(row.deliveredAt, at(64_000));
    });

    it('dead-letters a stale claim on its last attempt instead of sending it again', async () => {
      await reset();
      await queued(2);
      const [last, other] = await repo().claimDue(at(0), at(-62_000), 10);
      await db()
        .updateTable('webhookDeliveries')
        .set({ attempts: 6 })
        .where('id', '=', last.id)
        .execute();
      // Past the lease: only the row with attempts left is taken over.
      const taken = await repo().claimDue(at(63_000), at(1_000), 10, {
        perSubscription: 10,
        maxAttempts: 6,
      });
      assert.deepEqual(
        taken.map((d) => d.id),
        [other.id],
      );
      assert.equal(await repo().deadLetterStale(at(1_000), 6), 1);
      const row = (await rows()).find((r) => r.id === last.id);
      assert.equal(row?.status, 'dead_letter');
      assert.equal(row?.attempts, 6);
      assert.equal(row?.claimedAt, null);
      assert.equal(await repo().deadLetterStale(at(1_000), 6), 0);
    });

    it('records a mixed batch in one go: retries, dead letters, successes', async () => {
      await reset();
      await queued(3);
      const claimed = await repo().claimDue(at(0), at(-62_000), 10);
      const [retry, dead, ok] = claimed.sort((x, y) => x.id.localeCompare(y.id));
      await ctx.runtime.database.withTransaction(() =>
        repo().recordOutcomes([
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
      assert.deepEqual(await repo().claimDue(at(59_000), at(-62_000), 10), []);
      const [again] = await repo().claimDue(at(60_000), at(-62_000), 10);
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
      const claimed = await repo().claimDue(at(0), at(-62_000), 10, { perSubscription: 4 });
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
        const [claim] = await repo().claimDue(at(at0), at(-62_000), 10);
        await ctx.runtime.database.withTransaction(() =>
          repo().recordOutcomes([
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
        await repo().claimDue(at(0), at(-62_000), 10, {
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
      assert.deepEqual(await repo().claimDue(at(0), at(-62_000), 10), []);
      await db()
        .updateTable('webhookSubscriptions')
        .set({ active: true })
        .where('id', '=', subscriptionId)
        .execute();
      assert.equal((await repo().claimDue(at(0), at(-62_000), 10)).length, 2);
    });
  });
}
