import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { DeliveryQueue } from '../src/delivery/queue.ts';
import { startWorker } from '../src/start-worker.ts';
import { BACKENDS, createTestContext, type TestContext } from './helpers/context.ts';
import { deliveryRows } from './helpers/delivery-rows.ts';
import {
  createClient,
  createSubscription,
  createTenant,
  type TenantFixture,
} from './helpers/fixtures.ts';
import { HttpsReceiver, testCa } from './helpers/https-receiver.ts';
import { eventually, until } from './helpers/until.ts';

// One delivery's fault on our side is its own: the batch it was recorded with, the crash-loop
// sweep it was found by, and every later claim go on (a fault injected into the queue).

const SUBSCRIPTIONS = 5;

for (const backend of BACKENDS) {
  describe(`one delivery's fault is its own (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let receiver: HttpsReceiver;

    before(async () => {
      const ca = await testCa();
      ctx = await createTestContext(backend, {
        env: {
          WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
          WEBHOOK_CA_FILE: ca.caFile,
          WEBHOOK_RETRY_SCHEDULE: '1s',
        },
      });
      tenant = await createTenant(ctx, { tier: 'enterprise' });
      receiver = await HttpsReceiver.start();
    });
    after(async () => {
      await receiver.close();
      await ctx.close();
    });

    const queue = () => ctx.runtime.queue;
    const db = () => ctx.runtime.database.db;
    const faults = async (stage: string) =>
      (await ctx.runtime.metrics.deliveryFaults.get()).values.find((v) => v.labels.stage === stage)
        ?.value ?? 0;
    const statuses = async (ids: string[]) => {
      const rows = await deliveryRows(db())
        .select(['subscriptionId', 'status', 'attempts'])
        .where('subscriptionId', 'in', ids)
        .execute();
      return rows;
    };
    /** Replaces one method of the queue while `body` runs. */
    async function faulty<K extends keyof DeliveryQueue>(
      name: K,
      replacement: (original: DeliveryQueue[K]) => DeliveryQueue[K],
      body: () => Promise<void>,
    ) {
      const target = queue();
      const original = target[name];
      target[name] = replacement(original.bind(target) as DeliveryQueue[K]);
      try {
        await body();
      } finally {
        target[name] = original;
      }
    }

    it('records the rest of a batch whose one settlement throws, and sends that one again', async () => {
      await db().deleteFrom('webhookDeliveries').execute();
      const ids: string[] = [];
      for (let i = 0; i < SUBSCRIPTIONS; i++) {
        const created = await createSubscription(ctx, tenant, receiver.url(`/batch-${i}`));
        ids.push(created.data.id);
      }
      const [poisoned] = ids;
      // Every answer held until all have arrived: they settle together, one batch.
      let open: () => void = () => undefined;
      const gate = new Promise<void>((resolve) => {
        open = resolve;
      });
      receiver.respond((r) =>
        r.path.startsWith('/batch-') ? { status: 204, after: gate } : { status: 204 },
      );
      const batches: number[] = [];
      const running = startWorker(ctx.runtime, { pollIntervalMs: 100 });
      try {
        await faulty(
          'record',
          (record) => async (batch) => {
            const rows = await deliveryRows(db())
              .select('id')
              .where('subscriptionId', '=', poisoned)
              .execute();
            const poison = new Set(rows.map((row) => row.id));
            if (batch.outcomes.some((o) => poison.has(o.id))) {
              batches.push(batch.outcomes.length);
              throw new Error('injected: this delivery cannot be recorded');
            }
            return record(batch);
          },
          async () => {
            await createClient(ctx, tenant, { displayName: 'Batch' });
            await receiver.waitFor(SUBSCRIPTIONS);
            open();
            await eventually(async () => {
              const rows = await statuses(ids);
              return rows.filter((r) => r.status === 'success').length === SUBSCRIPTIONS - 1;
            }, 'the rest of the batch recorded');
            assert.ok(
              batches.some((n) => n === SUBSCRIPTIONS),
              `recorded together first, then apart: ${batches.join(' ')}`,
            );
            const [held] = (await statuses([poisoned])) as Array<{
              status: string;
              attempts: number;
            }>;
            assert.equal(held.status, 'pending', 'given back, to be sent again');
            assert.equal(held.attempts, 0, 'its attempt not counted as made');
            assert.equal(await faults('record'), 1);
            // Later claims proceed: a new event reaches every endpoint but the poisoned one's row
            // is given back again while the fault lasts.
            const before = receiver.requests.length;
            await createClient(ctx, tenant, { displayName: 'After' });
            await receiver.waitFor(before + SUBSCRIPTIONS);
            await eventually(async () => {
              const rows = await statuses(ids.slice(1));
              return rows.filter((r) => r.status === 'success').length === 2 * (SUBSCRIPTIONS - 1);
            }, 'a later claim recorded');
          },
        );
        // The fault gone, the poisoned subscription's deliveries are sent again and recorded.
        await eventually(async () => {
          const rows = await statuses([poisoned]);
          return rows.length === 2 && rows.every((r) => r.status === 'success');
        }, 'the given-back deliveries recorded once the fault is gone');
      } finally {
        await running.stop();
      }
    });

    it('dead-letters the other crash loops when one cannot be, and claims go on', async () => {
      await db().deleteFrom('webhookDeliveries').execute();
      const dead = await createSubscription(ctx, tenant, receiver.url('/dead-letters'), {
        events: ['webhook.delivery.dead_lettered'],
      });
      const loops: string[] = [];
      for (const name of ['loop-a', 'loop-b']) {
        loops.push((await createSubscription(ctx, tenant, receiver.url(`/${name}`))).data.id);
      }
      // No worker runs yet: the event's rows stay pending, then are made crash loops by hand
      // (their third claim's worker long dead, the first attempt never finished).
      await createClient(ctx, tenant, { displayName: 'Looped' });
      const rows = await deliveryRows(db())
        .select(['id', 'subscriptionId'])
        .where('subscriptionId', 'in', loops)
        .orderBy('subscriptionId')
        .execute();
      assert.equal(rows.length, 2);
      await db()
        .updateTable('webhookDeliveries')
        .set({
          status: 'in_flight',
          claimedBy: 'wkr_long_dead',
          claimedAt: '2020-01-01T00:00:00.000Z',
          attempts: 1,
          workerLosses: 2,
        })
        .where('subscriptionId', 'in', loops)
        .execute();
      const stuck = rows.find((r) => r.subscriptionId === loops[0])?.id as string;
      receiver.respond(() => ({ status: 204 }));
      const running = startWorker(ctx.runtime, { pollIntervalMs: 100 });
      try {
        await faulty(
          'deadLetterAbandoned',
          (deadLetter) =>
            async (id, ...rest) => {
              if (id === stuck)
                throw new Error('injected: this crash loop cannot be dead-lettered');
              return deadLetter(id, ...rest);
            },
          async () => {
            const announced = await until(
              () => receiver.requests.find((r) => r.path === '/dead-letters'),
              'the other crash loop announced',
            );
            const body = JSON.parse(announced.body);
            assert.equal(body.data.subscriptionId, loops[1]);
            assert.equal(body.data.attempts, 0, 'its first attempt never finished');
            await eventually(async () => (await faults('crash_loop')) >= 1, 'the fault counted');
            // The claim goes on: a new event is delivered meanwhile.
            await createClient(ctx, tenant, { displayName: 'Meanwhile' });
            await until(
              () => receiver.requests.find((r) => r.path === '/loop-b'),
              'a later delivery sent',
            );
            const [row] = await statuses([loops[0]]);
            assert.equal(row.status, 'in_flight', 'the faulty row waits for the next sweep');
          },
        );
        // The fault gone, the next sweep dead-letters it.
        await eventually(async () => {
          const row = await deliveryRows(db())
            .select(['status', 'lastError'])
            .where('id', '=', stuck)
            .executeTakeFirstOrThrow();
          return row.status === 'dead_letter' && row.lastError === 'worker_lost';
        }, 'dead-lettered by a later sweep');
        assert.equal(dead.data.active, true);
      } finally {
        await running.stop();
      }
    });
  });
}
