import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startWorker } from '../src/start-worker.ts';
import { BACKENDS, createWebhookTestContext, type TestContext } from './helpers/context.ts';
import { deliveryRows } from './helpers/delivery-rows.ts';
import { createClient, createSubscription, createTenant } from './helpers/fixtures.ts';
import { HttpsReceiver } from './helpers/https-receiver.ts';
import { until } from './helpers/until.ts';

// A retry due at once races its own settlement: once the outcome commits, a claim on another
// connection can take the row again before the worker has read the commit's answer. The worker
// must then hold the new claim, not forget it with the old one (a row claimed by a live worker
// is never taken over, so a forgotten claim is a delivery stuck in flight for good).

const RETRIES = 8;
const SUBSCRIPTIONS = 5;
const CLIENTS_A_ROUND = 20;
const ROUNDS = 3;

for (const backend of BACKENDS) {
  describe(`retries due at once, claimed again as their outcome commits (${backend})`, () => {
    let ctx: TestContext;
    let receiver: HttpsReceiver;
    let worker: ReturnType<typeof startWorker>;

    before(async () => {
      ctx = await createWebhookTestContext(backend, {
        WEBHOOK_RETRY_SCHEDULE: Array(RETRIES).fill('1ms').join(','),
        WEBHOOK_AUTOPAUSE_FAILURES: '1000000',
        WEBHOOK_AUTOPAUSE_WINDOW: '0s',
      });
      receiver = await HttpsReceiver.start({ responder: () => ({ status: 500 }) });
      worker = startWorker(ctx.runtime, { pollIntervalMs: 5 });
    });
    after(async () => {
      await worker?.stop();
      await receiver?.close();
      await ctx?.close();
    });

    it(`every delivery takes its ${RETRIES + 1} attempts, each once, and leaves the queue`, async () => {
      const { db } = ctx.runtime.database;
      const tenant = await createTenant(ctx, { tier: 'pro' });
      for (let i = 0; i < SUBSCRIPTIONS; i++) {
        await createSubscription(ctx, tenant, receiver.url(`/s${i}`));
      }
      // Rounds, so that new deliveries' first attempts run beside others' retries.
      for (let round = 0; round < ROUNDS; round++) {
        for (let i = 0; i < CLIENTS_A_ROUND; i++) {
          await createClient(ctx, tenant, { displayName: `Round ${round} client ${i}` });
        }
        await until(async () => {
          const open = await deliveryRows(db)
            .select('id')
            .where('status', '<>', 'dead_letter')
            .execute();
          return open.length === 0 ? true : undefined;
        }, `round ${round}: every delivery dead-lettered (none left in flight)`);
      }
      const deliveries = await deliveryRows(db).select(['id', 'attempts']).execute();
      assert.equal(deliveries.length, SUBSCRIPTIONS * CLIENTS_A_ROUND * ROUNDS);
      const attempts = await db
        .selectFrom('webhookAttempts')
        .select(['deliveryId', 'attempt'])
        .orderBy('deliveryId')
        .orderBy('attempt')
        .execute();
      const byDelivery = new Map<string, number[]>();
      for (const { deliveryId, attempt } of attempts) {
        byDelivery.set(deliveryId, [...(byDelivery.get(deliveryId) ?? []), attempt]);
      }
      const numbers = Array.from({ length: RETRIES + 1 }, (_, i) => i + 1);
      for (const delivery of deliveries) {
        assert.equal(delivery.attempts, RETRIES + 1, delivery.id);
        assert.deepEqual(
          byDelivery.get(delivery.id),
          numbers,
          `${delivery.id}: each attempt logged once`,
        );
      }
      const queued = await db.selectFrom('webhookQueue').select('deliveryId').execute();
      assert.deepEqual(queued, [], 'nothing left in the queue');
    });
  });
}
