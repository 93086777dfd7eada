import assert from 'node:assert/strict';
import { after, afterEach, before, describe, it } from 'node:test';
import { startWorker } from '../src/start-worker.ts';
import { attemptLog, mostWithin } from './helpers/attempt-log.ts';
import { BACKENDS, createWebhookTestContext, type TestContext } from './helpers/context.ts';
import { deliveryRows } from './helpers/delivery-rows.ts';
import {
  createSubscription,
  createTenant,
  createTrip,
  type TenantFixture,
} from './helpers/fixtures.ts';
import { HttpsReceiver } from './helpers/https-receiver.ts';
import { until } from './helpers/until.ts';

// Adaptive concurrency per subscription, with real HTTPS receivers and the real worker: each
// test writes its backlog first, then works it off with a worker of its own.

interface DeliveryState {
  concurrencyLimit: number;
  inFlight: number;
  pausedUntil: string | null;
  reason: string | null;
}

/**
 * A receiver that answers after `delayMs`, with `answer` of the requests open at once (this one
 * included); the receiver counts a request open until its answer has left.
 */
async function countingReceiver(delayMs: number, answer: (open: number) => number) {
  let refused = 0;
  const receiver = await HttpsReceiver.start();
  receiver.respond(() => {
    const status = answer(receiver.openRequests);
    if (status >= 500) refused += 1;
    return { status, delayMs };
  });
  return { receiver, refused: () => refused };
}

for (const backend of BACKENDS) {
  describe(`adaptive concurrency per subscription (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;

    before(async () => {
      ctx = await createWebhookTestContext(backend, {
        WEBHOOK_RETRY_SCHEDULE: '200ms,200ms,200ms,200ms',
      });
      tenant = await createTenant(ctx, { tier: 'pro' });
      await ctx.admin('PATCH', `/admin/v1/tenants/${tenant.id}`, { webhookEndpointCap: 20 });
    });
    after(async () => {
      await ctx.close();
    });

    // Each test's subscriptions go with it: a later test's receiver may get the port of an
    // earlier one's, and every subscription of the tenant hears each backlog's events.
    const subscribed: string[] = [];
    afterEach(async () => {
      for (const id of subscribed.splice(0)) {
        const deleted = await ctx.api('DELETE', `/api/v1/webhooks/${id}`, { token: tenant.token });
        assert.equal(deleted.statusCode, 204, deleted.body);
      }
    });
    const subscribe = async (url: string, extra: Record<string, unknown> = {}) => {
      const created = (await createSubscription(ctx, tenant, url, extra)).data as unknown as {
        id: string;
        deliveryState: DeliveryState;
      };
      subscribed.push(created.id);
      return created;
    };
    /** `n` client.created events, 20 writes at a time. */
    const backlog = async (n: number) => {
      for (let done = 0; done < n; done += 20) {
        const writes = Array.from({ length: Math.min(20, n - done) }, (_, i) =>
          ctx.api('POST', '/api/v1/clients', {
            token: tenant.token,
            body: { kind: 'individual', displayName: `Client ${done + i}` },
          }),
        );
        for (const written of await Promise.all(writes)) {
          assert.equal(written.statusCode, 201, written.body);
        }
      }
    };
    const stateOf = async (id: string): Promise<DeliveryState> => {
      const listed = await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token });
      return listed.json().data.find((s: { id: string }) => s.id === id).deliveryState;
    };
    /** Every delivery of the subscription succeeded; limits seen on the way. */
    const workOff = async (
      id: string,
      events: number,
      onStart?: (at: Date, slotMs: number | null) => void,
    ) => {
      const worker = startWorker(ctx.runtime, { pollIntervalMs: 50 });
      if (onStart) worker.worker.on('started', (_delivery, at, slotMs) => onStart(at, slotMs));
      const limits: number[] = [];
      try {
        await until(
          async () => {
            limits.push((await stateOf(id)).concurrencyLimit);
            const pending = await ctx.runtime.repositories.webhooks.recentCounts(
              tenant.id,
              [id],
              '',
            );
            const succeeded = pending.find((row) => row.status === 'success');
            return Number(succeeded?.n ?? 0) >= events ? true : undefined;
          },
          `${events} deliveries`,
          // A sample of the limit every 100 ms: polling the API faster costs the worker its CPU.
          100,
        );
      } finally {
        await worker.stop();
      }
      return limits;
    };

    it('starts at 4 and shows the subscription its default ceiling of 16', async () => {
      const receiver = await HttpsReceiver.start();
      try {
        const created = await subscribe(receiver.url('/fresh'));
        assert.deepEqual(created.deliveryState, {
          concurrencyLimit: 4,
          inFlight: 0,
          pausedUntil: null,
          reason: null,
        });
        const listed = await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token });
        const shown = listed.json().data.find((s: { id: string }) => s.id === created.id);
        assert.equal(shown.maxConcurrency, 16);
      } finally {
        await receiver.close();
      }
    });

    it('refuses maxConcurrency outside 1-64 and maxPerSecond outside 1-1000, changing nothing', async () => {
      const receiver = await HttpsReceiver.start();
      try {
        const invalid = [
          ...[0, 65, 2.5, '8', null].map((maxConcurrency) => ({ maxConcurrency })),
          ...[0, 1001, 1.5, '10'].map((maxPerSecond) => ({ maxPerSecond })),
        ];
        for (const member of invalid) {
          const refused = await ctx.api('POST', '/api/v1/webhooks', {
            token: tenant.token,
            body: { url: receiver.url('/bad'), events: ['client.created'], ...member },
          });
          assert.equal(refused.statusCode, 422, JSON.stringify(member));
          assert.match(String(refused.headers['content-type']), /^application\/problem\+json/);
        }
        const listed = await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token });
        assert.ok(
          listed.json().data.every((s: { url: string }) => !s.url.endsWith('/bad')),
          'nothing created',
        );
        const created = await subscribe(receiver.url('/patched'), { maxConcurrency: 2 });
        assert.equal(created.deliveryState.concurrencyLimit, 2, 'the limit within the ceiling');
        const refused = await ctx.api('PATCH', `/api/v1/webhooks/${created.id}`, {
          token: tenant.token,
          body: { maxConcurrency: 100 },
        });
        assert.equal(refused.statusCode, 422);
        const patched = await ctx.api('PATCH', `/api/v1/webhooks/${created.id}`, {
          token: tenant.token,
          body: { maxConcurrency: 64 },
        });
        assert.equal(patched.statusCode, 200, patched.body);
        assert.equal(patched.json().data.maxConcurrency, 64);
        assert.equal(patched.json().data.deliveryState.concurrencyLimit, 4);
        const capped = await ctx.api('PATCH', `/api/v1/webhooks/${created.id}`, {
          token: tenant.token,
          body: { maxPerSecond: 1000 },
        });
        assert.equal(capped.json().data.maxPerSecond, 1000);
        const uncapped = await ctx.api('PATCH', `/api/v1/webhooks/${created.id}`, {
          token: tenant.token,
          body: { maxPerSecond: null },
        });
        assert.equal(uncapped.json().data.maxPerSecond, null);
      } finally {
        await receiver.close();
      }
    });

    it('settles near the capacity of an endpoint that answers 503 above 3 at once', async () => {
      const { receiver, refused } = await countingReceiver(25, (open) => (open > 3 ? 503 : 200));
      try {
        const { id } = await subscribe(receiver.url('/three'));
        await backlog(200);
        const limits = await workOff(id, 200);
        // Never above 5; below 2 only for a moment (a reset connection is a push back too).
        const settled = limits.slice(Math.floor(limits.length / 4));
        const low = settled.filter((limit) => limit < 2).length;
        assert.ok(
          settled.every((limit) => limit <= 5) && low <= settled.length / 10,
          `limits seen: ${limits.join(',')}`,
        );
        const wasted = refused() / receiver.requests.length;
        assert.ok(wasted < 0.2, `${refused()} of ${receiver.requests.length} refused`);
        // Each attempt row keeps the limit it was sent under.
        const [delivery] = (
          await ctx.api('GET', `/api/v1/webhooks/${id}/deliveries?status=success`, {
            token: tenant.token,
          })
        ).json().data;
        const [attempt] = (
          await ctx.api('GET', `/api/v1/webhooks/${id}/deliveries/${delivery.id}/attempts`, {
            token: tenant.token,
          })
        ).json().data;
        assert.ok(attempt.concurrencyLimit >= 1 && attempt.concurrencyLimit <= 5, attempt);
      } finally {
        await receiver.close();
      }
    });

    it('drives the limit to the maximum for a fast endpoint, never past it', async () => {
      const { receiver } = await countingReceiver(15, () => 200);
      try {
        const { id } = await subscribe(receiver.url('/fast'), { maxConcurrency: 10 });
        await backlog(200);
        await workOff(id, 200);
        const state = await stateOf(id);
        assert.equal(state.concurrencyLimit, 10);
        assert.equal(state.reason, null);
        const most = receiver.mostOpenRequests;
        assert.ok(most <= 10 && most > 4, `${most} requests at once`);
      } finally {
        await receiver.close();
      }
    });

    it('holds maxPerSecond with evenly spaced sends, one attempt each', async () => {
      const receiver = await HttpsReceiver.start();
      try {
        const { id } = await subscribe(receiver.url('/capped'), { maxPerSecond: 5 });
        const EVENTS = 15;
        await backlog(EVENTS);
        const paced: { atMs: number; slotMs: number | null }[] = [];
        await workOff(id, EVENTS, (at, slotMs) => paced.push({ atMs: at.getTime(), slotMs }));
        assert.equal(receiver.requests.length, EVENTS, 'each delivered once');
        // From the attempt log: no sliding second holds more than the cap.
        const starts = (await attemptLog(ctx.runtime.database.db, id)).map((a) => a.startMs);
        assert.equal(starts.length, EVENTS);
        assert.ok(mostWithin(starts) <= 5, `${mostWithin(starts)} started within one second`);
        // Evenly spaced, from the worker's own record: each start at or after its send slot, the
        // slots a fifth of a second apart at least. A loaded machine makes starts late, and a
        // late start may be closer to the next one; it moves no slot.
        assert.equal(paced.length, EVENTS);
        for (const { atMs, slotMs } of paced) {
          assert.ok(slotMs !== null && atMs >= slotMs, `a start at ${atMs}, its slot ${slotMs}`);
        }
        const slots = paced.map(({ slotMs }) => slotMs as number).sort((a, b) => a - b);
        for (const [i, slot] of slots.entries()) {
          if (i > 0) assert.ok(slot - slots[i - 1] >= 1000 / 5, `slots ${slots.join(', ')}`);
        }
        // Waiting for its slot, a claim is one attempt.
        const attempts = await deliveryRows(ctx.runtime.database.db)
          .select('attempts')
          .where('subscriptionId', '=', id)
          .execute();
        assert.ok(
          attempts.every((row) => row.attempts === 1),
          JSON.stringify(attempts),
        );
      } finally {
        await receiver.close();
      }
    });

    /**
     * Twelve events to a subscription capped at five a second, worked off while this process's
     * event loop is blocked 45 ms of every 60 (its timers fire late), by the workOff worker and
     * `others` more: one attempt each, and never more than five started within a second.
     */
    const workOffLagging = async (path: string, others: number) => {
      const receiver = await HttpsReceiver.start();
      const blocker = setInterval(() => {
        const until = performance.now() + 45;
        while (performance.now() < until);
      }, 15);
      const more = Array.from({ length: others }, () =>
        startWorker(ctx.runtime, { pollIntervalMs: 50 }),
      );
      try {
        const { id } = await subscribe(receiver.url(path), { maxPerSecond: 5 });
        const EVENTS = 12;
        await backlog(EVENTS);
        await workOff(id, EVENTS);
        const starts = (await attemptLog(ctx.runtime.database.db, id)).map((a) => a.startMs);
        assert.equal(starts.length, EVENTS, 'one attempt each');
        assert.ok(mostWithin(starts) <= 5, `${mostWithin(starts)} started within one second`);
      } finally {
        clearInterval(blocker);
        await Promise.all(more.map((worker) => worker.stop()));
        await receiver.close();
      }
    };

    it('keeps maxPerSecond and makes progress while its event loop lags', async () => {
      // Alone, a worker cannot start within a fixed margin of its slots: its own record of its
      // starts keeps the cap however late it goes.
      await workOffLagging('/lagging', 0);
    });

    it('keeps maxPerSecond with two workers beside each other while their event loop lags', async () => {
      // Two workers count each other in the registry: neither knows itself alone, so a start
      // later than its slot's margin is given back and widens the margin instead of going.
      await workOffLagging('/lagging-pair', 1);
    });

    it('orders per object: A1 fails once, A2 waits for it, B1 does not', async () => {
      const trips = {
        a: (await createTrip(ctx, tenant, { title: 'A' })).id as string,
        b: (await createTrip(ctx, tenant, { title: 'B' })).id as string,
      };
      const failedOnce = new Set<string>();
      const receiver = await HttpsReceiver.start({
        responder: (request) => {
          const event = JSON.parse(request.body);
          const key = `${event.type}:${event.data.tripId}`;
          if (event.data.tripId === trips.a && !failedOnce.has(key)) {
            failedOnce.add(key);
            if (event.type === 'trip.published') return { status: 500 };
          }
          return { status: 200 };
        },
      });
      const created = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: {
          url: receiver.url('/ordered'),
          events: ['trip.published', 'trip.unpublished'],
          ordering: 'per_object',
        },
      });
      assert.equal(created.statusCode, 201, created.body);
      subscribed.push(created.json().data.id);
      assert.equal(created.json().data.ordering, 'per_object');
      await ctx.admin('POST', `/admin/v1/trips/${trips.a}/publish`);
      await ctx.admin('POST', `/admin/v1/trips/${trips.a}/unpublish`);
      await ctx.admin('POST', `/admin/v1/trips/${trips.b}/publish`);
      const worker = startWorker(ctx.runtime, { pollIntervalMs: 50 });
      try {
        await receiver.waitFor(4);
        const seen = receiver.requests.map((r) => {
          const event = JSON.parse(r.body);
          const trip = event.data.tripId === trips.a ? 'A' : 'B';
          const step = event.type === 'trip.published' ? 1 : 2;
          return { name: `${trip}${step}`, at: r.receivedAt, sequence: event.sequence };
        });
        const at = (name: string, nth = 0) => seen.filter((e) => e.name === name)[nth].at;
        assert.deepEqual(seen.map((e) => e.name).sort(), ['A1', 'A1', 'A2', 'B1']);
        assert.ok(at('A2') > at('A1', 1), 'A2 after A1 was delivered');
        assert.ok(at('B1') < at('A1', 1), 'B1 did not wait for A1');
      } finally {
        await worker.stop();
        await receiver.close();
      }
    });

    it('shows a cut as backpressure, and a Retry-After as a pause until then', async () => {
      let answer = 503;
      const receiver = await HttpsReceiver.start({
        responder: () =>
          answer === 503 ? { status: 503 } : { status: 429, headers: { 'retry-after': '30' } },
      });
      const worker = startWorker(ctx.runtime, { pollIntervalMs: 50 });
      const holds: Array<{ at: string; holdUntil: string }> = [];
      worker.worker.on('attempted', ({ at, holdUntil }) => {
        if (holdUntil !== null) holds.push({ at, holdUntil });
      });
      try {
        const { id } = await subscribe(receiver.url('/pushing-back'));
        await backlog(1);
        const cut = await until(async () => {
          const state = await stateOf(id);
          return state.reason === 'backpressure' ? state : undefined;
        });
        assert.equal(cut.concurrencyLimit, 2);
        answer = 429;
        const held = await until(async () => {
          const state = await stateOf(id);
          return state.reason === 'retry_after' ? state : undefined;
        });
        // Paused until 30 s after the 429's attempt ended, as the worker decided it.
        assert.equal(holds.length, 1);
        assert.equal(Date.parse(holds[0].holdUntil) - Date.parse(holds[0].at), 30_000);
        assert.equal(held.pausedUntil, holds[0].holdUntil);
        assert.equal(held.concurrencyLimit, 1);
      } finally {
        await worker.stop();
        await receiver.close();
      }
    });
  });
}
