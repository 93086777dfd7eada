import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import type { ClaimOptions } from '../src/delivery/queue.ts';
import { abandonedBefore } from '../src/delivery/registry.ts';
import { BACKENDS, createTestContext, type TestContext } from './helpers/context.ts';
import { deliveryRows } from './helpers/delivery-rows.ts';
import { createTenant, type TenantFixture } from './helpers/fixtures.ts';

// During a rolled upgrade the previous release claims and settles the history's `status` while
// this one claims the queue (migration 0032): the database keeps the two in step, so no delivery
// is sent by both at once and none is lost. The previous release's statements are written here
// as it runs them (its queue.ts and claim-sql.ts), on both backends.

const WEBHOOK = { timeoutMs: 2_000, leaseGraceMs: 60_000, workerDeadAfterMs: 10_000 };
const at = (ms: number) => new Date(Date.UTC(2030, 0, 1) + ms).toISOString();

for (const backend of BACKENDS) {
  describe(`the queue beside the previous release's statements (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let subscriptionId: string;

    before(async () => {
      ctx = await createTestContext(backend, { env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' } });
      tenant = await createTenant(ctx, { tier: 'pro' });
      // No worker runs in this suite: the rows stay where the test puts them.
      const created = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: 'https://127.0.0.1:9/compat', events: ['client.created'] },
      });
      assert.equal(created.statusCode, 201, created.body);
      subscriptionId = created.json().data.id;
    });
    after(() => ctx.close());

    const db = () => ctx.runtime.database.db;
    const repo = () => ctx.runtime.repositories.webhooks;
    const claimDue = (now: string, limit: number, options: Partial<ClaimOptions> = {}) =>
      ctx.runtime.queue.claim(new Date(now), limit, {
        workerId: 'wkr_new',
        ...abandonedBefore(Date.parse(now), WEBHOOK),
        rowsPerSubscription: limit,
        paceHorizonUs: 500_000,
        ...options,
      });
    const rows = () =>
      deliveryRows(db())
        .selectAll()
        .where('subscriptionId', '=', subscriptionId)
        .orderBy('id')
        .execute();
    const queueRows = () =>
      db()
        .selectFrom('webhookQueue')
        .selectAll()
        .where('subscriptionId', '=', subscriptionId)
        .orderBy('deliveryId')
        .execute();
    async function queued(count: number): Promise<string[]> {
      for (let i = 0; i < count; i++) {
        const response = await ctx.api('POST', '/api/v1/clients', {
          token: tenant.token,
          body: { kind: 'individual', displayName: `C${i}` },
        });
        assert.equal(response.statusCode, 201);
      }
      return (await rows()).map((row) => row.id);
    }
    async function reset(): Promise<void> {
      await db().deleteFrom('webhookDeliveries').execute();
      await db().deleteFrom('webhookWorkers').execute();
      await ctx.runtime.queue.joinWorker('wkr_new', at(10_000_000));
    }

    /** The previous release's claim of these rows, if pending (its claim's final update). */
    const oldClaim = async (ids: string[], now: string, worker = 'wkr_old') => {
      const result = await sql<{ id: string }>`
        update webhook_deliveries
        set status = 'in_flight', claimed_at = ${now}, claimed_by = ${worker},
          attempts = case when status = 'in_flight' then attempts else attempts + 1 end,
          worker_losses = case when status = 'in_flight' then worker_losses + 1 else worker_losses end
        where id in (${sql.join(ids)}) and status in ('pending', 'in_flight')
        returning id`.execute(db());
      return result.rows.map((row) => row.id).sort();
    };
    /** The previous release's outcome of its claim at `claimedAt` (its recordOutcomes). */
    const oldOutcome = async (
      id: string,
      claimedAt: string,
      outcome: { status: 'success' | 'pending'; nextAttemptAt: string | null },
    ) => {
      await sql`update webhook_deliveries
        set status = ${outcome.status}, next_attempt_at = ${outcome.nextAttemptAt},
          last_response_status = 200, claimed_at = null, claimed_by = null, worker_losses = 0
        where id = ${id} and status = 'in_flight' and claimed_at = ${claimedAt}`.execute(db());
    };

    it("queues a pending row however it was written, the previous release's insert too", async () => {
      await reset();
      const [original] = await queued(1);
      const copy = `${original.slice(0, -4)}zzzz`;
      await sql`insert into webhook_deliveries
          (id, tenant_id, subscription_id, event_id, event_type, status, attempts, next_attempt_at, created_at, is_test)
        select ${copy}, tenant_id, subscription_id, event_id, event_type, 'pending', 0, ${at(0)}, created_at, is_test
        from webhook_deliveries where id = ${original}`.execute(db());
      const claimed = await claimDue(at(1), 10);
      assert.deepEqual(claimed.map((d) => d.id).sort(), [original, copy].sort());
    });

    it('never lets both releases claim one row, whichever claims first', async () => {
      await reset();
      const [a, b] = await queued(2);
      await ctx.runtime.queue.joinWorker('wkr_old', at(10_000_000));
      const [mine] = await claimDue(at(0), 1);
      assert.equal(mine.id, a);
      // The previous release's claim takes only the row no one holds.
      assert.deepEqual(await oldClaim([a, b], at(1)), [b]);
      assert.deepEqual(await claimDue(at(2), 10), [], 'both are held');
      const shown = await rows();
      assert.deepEqual(
        shown.map((row) => [row.status, row.attempts, row.claimedBy]),
        [
          ['in_flight', 1, 'wkr_new'],
          ['in_flight', 1, 'wkr_old'],
        ],
      );
      // The API shows the same.
      const listed = await ctx.api('GET', `/api/v1/webhooks/${subscriptionId}/deliveries`, {
        token: tenant.token,
      });
      assert.deepEqual(
        listed.json().data.map((d: { status: string }) => d.status),
        ['in_flight', 'in_flight'],
      );
    });

    it("follows the previous release's outcomes: a delivered row leaves the queue, a retried one is due again", async () => {
      await reset();
      const [done, retried] = await queued(2);
      await oldClaim([done, retried], at(0));
      await oldOutcome(done, at(0), { status: 'success', nextAttemptAt: null });
      await oldOutcome(retried, at(0), { status: 'pending', nextAttemptAt: at(60_000) });
      const queue = await queueRows();
      assert.deepEqual(
        queue.map((row) => [row.deliveryId, row.claimedAt, row.nextAttemptAt, row.attempts]),
        [[retried, null, at(60_000), 1]],
      );
      assert.deepEqual(await claimDue(at(59_000), 10), [], 'not due yet');
      const [again] = await claimDue(at(60_000), 10);
      assert.equal(again.id, retried);
      assert.equal(again.attempts, 2, 'the next attempt');
    });

    it("takes over a claim of the previous release's dead worker, as the same attempt", async () => {
      await reset();
      const [lost] = await queued(1);
      await ctx.runtime.queue.joinWorker('wkr_old', at(0));
      await oldClaim([lost], at(0));
      assert.deepEqual(await claimDue(at(1_000), 10), [], 'its worker lives');
      const later = at(1 + WEBHOOK.workerDeadAfterMs * 2);
      const [taken] = await claimDue(later, 10);
      assert.equal(taken.id, lost);
      assert.equal(taken.attempts, 1, 'the same attempt, sent again');
      // This release's outcome settles the row; the dead worker's late one then changes nothing.
      await ctx.runtime.database.withTransaction(() =>
        ctx.runtime.queue.recordOutcomes([
          {
            id: taken.id,
            claimedAt: taken.claimedAt,
            status: 'success',
            attempts: taken.attempts,
            lastResponseStatus: 200,
            lastError: null,
            nextAttemptAt: null,
            deliveredAt: later,
          },
        ]),
      );
      assert.deepEqual(await queueRows(), []);
      await oldOutcome(lost, at(0), { status: 'pending', nextAttemptAt: at(5) });
      assert.deepEqual(await queueRows(), []);
      const [row] = await rows();
      assert.deepEqual([row.status, row.attempts, row.deliveredAt], ['success', 1, later]);
    });

    it('never lets both releases claim one row when their claims race', async () => {
      await reset();
      await repo().updateSubscription(tenant.id, subscriptionId, {
        maxConcurrency: 64,
        concurrencyLimit: 64,
      });
      try {
        for (const worker of ['wkr_n1', 'wkr_n2', 'wkr_n3', 'wkr_o1', 'wkr_o2', 'wkr_o3']) {
          await ctx.runtime.queue.joinWorker(worker, at(10_000_000));
        }
        // The previous release's claim of its subscription's due rows, as its claim-sql.ts
        // takes them (pending, earliest first, skipping rows another claim has locked).
        const oldDueClaim = async (worker: string, now: string) => {
          const locked = backend === 'postgres' ? sql`for update skip locked` : sql``;
          const result = await sql<{ id: string }>`
            update webhook_deliveries
            set status = 'in_flight', claimed_at = ${now}, claimed_by = ${worker},
              attempts = attempts + 1
            where id in (select id from webhook_deliveries
              where status = 'pending' and subscription_id = ${subscriptionId}
              order by next_attempt_at limit 20 ${locked})
            returning id`.execute(db());
          return result.rows.map((row) => row.id);
        };
        for (let round = 0; round < 10; round++) {
          await db().deleteFrom('webhookDeliveries').execute();
          await queued(60);
          const now = at(round);
          const newClaim = (worker: string) =>
            claimDue(now, 20, { workerId: worker }).then((claimed) => claimed.map((d) => d.id));
          const claims = await Promise.all([
            newClaim('wkr_n1'),
            oldDueClaim('wkr_o1', now),
            newClaim('wkr_n2'),
            oldDueClaim('wkr_o2', now),
            newClaim('wkr_n3'),
            oldDueClaim('wkr_o3', now),
          ]);
          const all = claims.flat();
          assert.equal(new Set(all).size, all.length, `round ${round}: no row claimed twice`);
          const held = (await queueRows()).filter((row) => row.claimedAt !== null);
          assert.deepEqual(
            held.map((row) => row.deliveryId).sort(),
            [...all].sort(),
            `round ${round}: the queue holds every claim, of either release`,
          );
        }
      } finally {
        await repo().updateSubscription(tenant.id, subscriptionId, {
          maxConcurrency: 16,
          concurrencyLimit: 4,
        });
      }
    });
  });
}
