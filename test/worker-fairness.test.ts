import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  tenantClaimPlan,
  tenantReopened,
  tenantSlotCap,
  tenantWillReopen,
} from '../src/delivery/admission.ts';
import { startWorker } from '../src/start-worker.ts';
import { BACKENDS, createWebhookTestContext, type TestContext } from './helpers/context.ts';
import { createTenant } from './helpers/fixtures.ts';
import { HttpsReceiver } from './helpers/https-receiver.ts';
import { until } from './helpers/until.ts';

describe('tenant slot caps (pure)', () => {
  it('gives a lone tenant half the slots, shares them as tenants come, never below one subscription', () => {
    assert.equal(tenantSlotCap(256, 32, 0), 128);
    assert.equal(tenantSlotCap(256, 32, 1), 85);
    assert.equal(tenantSlotCap(256, 32, 2), 64);
    assert.equal(tenantSlotCap(256, 32, 20), 32);
  });

  it('lets a claim take of each tenant what its cap leaves, and nothing of one at its cap', () => {
    const plan = (entries: Array<[string, number]>) => {
      const { room, skip, newcomerRoom } = tenantClaimPlan(new Map(entries), 256, 32);
      return { room: Object.fromEntries(room), skip, newcomerRoom };
    };
    assert.deepEqual(plan([]), { room: {}, skip: [], newcomerRoom: 128 });
    // Alone at 128 of 256: at its cap; a newcomer may take 85.
    assert.deepEqual(plan([['a', 128]]), { room: {}, skip: ['a'], newcomerRoom: 85 });
    assert.deepEqual(plan([['a', 80]]), { room: { a: 48 }, skip: [], newcomerRoom: 85 });
    // Two holders: each capped at 85.
    assert.deepEqual(
      plan([
        ['a', 90],
        ['b', 10],
      ]),
      { room: { b: 75 }, skip: ['a'], newcomerRoom: 64 },
    );
  });

  it('wakes the claim loop once a held-back tenant has a quarter of its cap free', () => {
    assert.equal(tenantReopened(96, 0, 256, 32), true);
    assert.equal(tenantReopened(97, 0, 256, 32), false);
    assert.equal(tenantReopened(95, 0, 256, 32), false);
    assert.equal(tenantReopened(63, 1, 256, 32), true); // cap 85
    // Holding more than that level, a tenant's ending attempts will wake the loop; at it, never.
    assert.equal(tenantWillReopen(97, 0, 256, 32), true);
    assert.equal(tenantWillReopen(96, 0, 256, 32), false);
  });
});

// Real hanging receivers: one tenant's ten endpoints accept and never answer; another tenant's
// endpoint answers at once. Without a tenant cap the first would hold every slot (10 × 8 > 40)
// and the second would wait for the time-out.
for (const backend of BACKENDS) {
  describe(`one tenant's hung endpoints never delay another tenant (${backend})`, () => {
    let ctx: TestContext;
    let receiver: HttpsReceiver;
    let worker: ReturnType<typeof startWorker>;
    let hanging = 0;
    let mostHanging = 0;

    before(async () => {
      ctx = await createWebhookTestContext(backend, { WEBHOOK_TIMEOUT_MS: '60000' });
      receiver = await HttpsReceiver.start({
        responder: (request) => {
          if (!request.path.startsWith('/dead')) return { status: 204 };
          hanging += 1;
          mostHanging = Math.max(mostHanging, hanging);
          return 'hang';
        },
      });
      worker = startWorker(ctx.runtime, {
        pollIntervalMs: 50,
        maxRunning: 40,
        maxPerSubscription: 8,
      });
    });
    after(async () => {
      // The hung attempts end when their connections do.
      await receiver.close();
      await worker.stop();
      await ctx.close();
    });

    it('delivers the other tenant promptly while the first holds only its share', async () => {
      const dead = await createTenant(ctx, { tier: 'pro' });
      for (let i = 0; i < 10; i++) {
        const created = await ctx.api('POST', '/api/v1/webhooks', {
          token: dead.token,
          body: { url: receiver.url(`/dead/${i}`), events: ['client.created'] },
        });
        assert.equal(created.statusCode, 201, created.body);
      }
      for (let i = 0; i < 20; i++) {
        await ctx.api('POST', '/api/v1/clients', {
          token: dead.token,
          body: { kind: 'individual', displayName: `Dead ${i}` },
        });
      }
      // The first tenant's attempts fill its share of the slots and hang there.
      await receiver.waitFor(tenantSlotCap(40, 8, 0));

      const live = await createTenant(ctx, { tier: 'pro' });
      const subscribed = await ctx.api('POST', '/api/v1/webhooks', {
        token: live.token,
        body: { url: receiver.url('/live'), events: ['client.created'] },
      });
      assert.equal(subscribed.statusCode, 201, subscribed.body);
      for (let i = 0; i < 5; i++) {
        await ctx.api('POST', '/api/v1/clients', {
          token: live.token,
          body: { kind: 'individual', displayName: `Live ${i}` },
        });
      }
      // Promptly: while every hung attempt still hangs (none has timed out to free a slot).
      await until(
        () => (receiver.requests.filter((r) => r.path === '/live').length >= 5 ? true : undefined),
        'the other tenant delivered',
      );
      // Promptly: before any of the first tenant's attempts ended (their time-out freeing slots).
      const ended = await ctx.runtime.database.db
        .selectFrom('webhookAttempts as a')
        .innerJoin('webhookDeliveries as d', 'd.id', 'a.deliveryId')
        .select('a.deliveryId')
        .where('d.tenantId', '=', dead.id)
        .execute();
      assert.deepEqual(ended, [], 'delivered while the first tenant still hangs');
      // The live tenant's claims ran after the first tenant's slots filled (the marker): had
      // they taken more of its rows, more would hang now.
      assert.ok(mostHanging <= tenantSlotCap(40, 8, 0), `${mostHanging} hung attempts at once`);
    });
  });
}

// The claim loop paced by signals alone (the poll is a minute): a backlog larger than the
// per-subscription cap must be worked off, and claims that come back empty must stay rare.
// Twice: capped by each subscription's share, and by the tenant's share of a small pool (its
// room runs out while attempts end during the claim).
const pacing = [
  { name: 'subscription caps', subscriptions: 2, events: 60, options: { maxPerSubscription: 8 } },
  {
    name: 'a tenant cap',
    subscriptions: 4,
    events: 40,
    options: { maxPerSubscription: 8, maxRunning: 24 },
  },
];
/** Claims of a backlog worked off: those that took rows, those that came back empty, rows taken. */
interface ClaimCounts {
  productive: number;
  empty: number;
  rows: number;
}

/** Works off `events` client.created events to `subscriptions` endpoints that answer after 5 ms. */
async function workOffBacklog(
  backend: (typeof BACKENDS)[number],
  setup: { subscriptions: number; events: number; options: Parameters<typeof startWorker>[1] },
): Promise<ClaimCounts> {
  const ctx = await createWebhookTestContext(backend);
  const receiver = await HttpsReceiver.start({
    responder: () => ({ status: 200, delayMs: 5 }),
  });
  let worker: ReturnType<typeof startWorker> | null = null;
  try {
    const tenant = await createTenant(ctx, { tier: 'pro' });
    for (let i = 0; i < setup.subscriptions; i++) {
      const created = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: receiver.url(`/s${i}`), events: ['client.created'] },
      });
      assert.equal(created.statusCode, 201, created.body);
      // The concurrency limit starts at the worker's own cap, so the slots alone pace the claims
      // (the limit's climb from its start is flow control's to test).
      await ctx.runtime.repositories.webhooks.updateSubscription(
        tenant.id,
        created.json().data.id,
        {
          concurrencyLimit: setup.options?.maxPerSubscription,
        },
      );
    }
    for (let i = 0; i < setup.events; i++) {
      await ctx.api('POST', '/api/v1/clients', {
        token: tenant.token,
        body: { kind: 'individual', displayName: `Backlog ${i}` },
      });
    }
    const { queue } = ctx.runtime;
    const claim = queue.claim.bind(queue);
    const counts: ClaimCounts = { productive: 0, empty: 0, rows: 0 };
    queue.claim = async (...args) => {
      const rows = await claim(...args);
      if (rows.length > 0) counts.productive += 1;
      else counts.empty += 1;
      counts.rows += rows.length;
      return rows;
    };
    worker = startWorker(ctx.runtime, { pollIntervalMs: 60_000, ...setup.options });
    await receiver.waitFor(setup.subscriptions * setup.events);
    return counts;
  } finally {
    await worker?.stop();
    await receiver.close();
    await ctx.close();
  }
}

for (const backend of BACKENDS) {
  describe(`the claim loop works off a backlog on signals alone (${backend})`, () => {
    for (const { name, subscriptions, events, options } of pacing)
      it(`delivers every row without waiting for the poll, with few empty claims (${name})`, async () => {
        const { productive, empty } = await workOffBacklog(backend, {
          subscriptions,
          events,
          options,
        });
        const expected = subscriptions * events;
        assert.ok(productive >= expected / 8, `${productive} claims took rows`);
        assert.ok(empty * 2 < productive, `${empty} empty claims, ${productive} with rows`);
      });

    // Each subscription reopens as its own attempts end. Claimed for one at a time, a claim takes
    // about one subscription's share; gathered, it takes several. The bar sits between the two,
    // at one and a half shares, so a busy host's slower attempts do not fail a sound claim loop.
    it('claims for several subscriptions whose slots reopened at once', async () => {
      const share = 4;
      const { productive, rows } = await workOffBacklog(backend, {
        subscriptions: 4,
        events: 60,
        options: { maxPerSubscription: 2 * share },
      });
      assert.equal(rows, 240);
      assert.ok(rows / productive >= 1.5 * share, `${productive} claims took ${rows} rows`);
    });
  });
}
