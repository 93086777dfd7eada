import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, it } from 'node:test';
import { startWorker } from '../src/start-worker.ts';
import { attemptLog, mostWithin, startsAfter } from './helpers/attempt-log.ts';
import { ManualClock } from './helpers/clock.ts';
import {
  createWebhookTestContext,
  describeEachBackend,
  type TestContext,
} from './helpers/context.ts';
import { createSubscription, createTenant, type TenantFixture } from './helpers/fixtures.ts';
import { HttpsReceiver } from './helpers/https-receiver.ts';
import { until } from './helpers/until.ts';
import { WorkerMonitor } from './helpers/worker-monitor.ts';

// The delivery engine's promises at its edges, checked from the attempt log (`startedAt`,
// `durationMs`) rather than by sleeping: a rate cap from the first second, a hold at once, and
// every signing key until the expiry promised for it. The crash and several processes are in
// test/webhook-workers.test.ts and test/scale-out-workers.test.ts.

describeEachBackend('delivery engine promises', (backend) => {
  let ctx: TestContext;
  let tenant: TenantFixture;
  let receiver: HttpsReceiver;

  before(async () => {
    ctx = await createWebhookTestContext(backend, { WEBHOOK_RETRY_SCHEDULE: '100ms,100ms' });
    tenant = await createTenant(ctx, { tier: 'enterprise' });
    receiver = await HttpsReceiver.start();
  });
  after(async () => {
    await receiver.close();
    await ctx.close();
  });

  const subscribe = async (path: string, extra: Record<string, unknown> = {}) =>
    (await createSubscription(ctx, tenant, receiver.url(path), extra)).data.id;
  const backlog = async (n: number, label: string) => {
    for (let done = 0; done < n; done += 10) {
      const writes = Array.from({ length: Math.min(10, n - done) }, (_, i) =>
        ctx.api('POST', '/api/v1/clients', {
          token: tenant.token,
          body: { kind: 'individual', displayName: `${label} ${done + i}` },
        }),
      );
      for (const written of await Promise.all(writes)) assert.equal(written.statusCode, 201);
    }
  };
  const arrivals = (path: string) =>
    receiver.requests.filter((r) => r.path === path).map((r) => r.receivedAt);
  const deactivate = (id: string) =>
    ctx.api('PATCH', `/api/v1/webhooks/${id}`, { token: tenant.token, body: { active: false } });

  it('keeps maxPerSecond in every sliding second from the first, beside busy endpoints, over two workers', async () => {
    const CAP = 5;
    const EVENTS = 30;
    const capped = await subscribe('/capped', { maxPerSecond: CAP });
    const busy = [await subscribe('/busy-1'), await subscribe('/busy-2')];
    receiver.respond(() => ({ status: 200 }));
    // The backlog is there before any worker runs: the first claim finds all of it.
    await backlog(EVENTS, 'Capped');
    const workers = [
      startWorker(ctx.runtime, { pollIntervalMs: 50 }),
      startWorker(ctx.runtime, { pollIntervalMs: 50 }),
    ];
    try {
      await until(
        () => (arrivals('/capped').length >= EVENTS ? true : undefined),
        `${EVENTS} capped deliveries`,
      );
      const log = await until(async () => {
        const rows = await attemptLog(ctx.runtime.database.db, capped);
        return rows.length >= EVENTS ? rows : undefined;
      }, 'every capped attempt recorded');
      assert.equal(log.length, EVENTS, 'one attempt each');
      const starts = log.map((a) => a.startMs);
      assert.ok(
        mostWithin(starts) <= CAP,
        `${mostWithin(starts)} attempts started within one second`,
      );
      // Not slower than the cap allows either: that the slots leave no gap is the pace's own
      // promise, checked with an injected clock (src/delivery/admission.test.ts); how long a
      // loaded machine takes to keep them is the bench's figure, not this test's.
      assert.ok(arrivals('/busy-1').length === EVENTS && arrivals('/busy-2').length === EVENTS);
    } finally {
      for (const { stop } of workers) await stop();
      for (const id of [capped, ...busy]) await deactivate(id);
    }
  });

  it('holds an endpoint from the moment its 429 with Retry-After arrives', async () => {
    const EVENTS = 40;
    const held = await subscribe('/held', { maxConcurrency: 8 });
    let answered = 0;
    receiver.respond((r) => {
      if (r.path !== '/held') return { status: 200 };
      answered += 1;
      // The tenth request is told to wait; the rest answer after a little work, so that other
      // attempts are claimed and waiting to start when the 429 arrives.
      if (answered === 10) return { status: 429, headers: { 'retry-after': '1' } };
      return { status: 200, delayMs: 30 };
    });
    await backlog(EVENTS, 'Held');
    const worker = startWorker(ctx.runtime, { pollIntervalMs: 50 });
    const monitor = new WorkerMonitor(worker.worker);
    try {
      await monitor.recorded(held, 'pending');
      await until(async () => {
        const log = await attemptLog(ctx.runtime.database.db, held);
        return log.filter((a) => a.status === 200).length >= EVENTS ? true : undefined;
      }, 'every held delivery delivered');
      const log = await attemptLog(ctx.runtime.database.db, held);
      const [refused] = log.filter((a) => a.status === 429);
      assert.ok(refused, 'a 429 recorded');
      // The log keeps whole milliseconds: allow one either way at the answer's edge.
      assert.deepEqual(
        startsAfter(log, refused, 1, 990),
        [],
        'attempts started after the 429 arrived, ms after it',
      );
      assert.ok(
        log.some((a) => a.startMs >= refused.endMs + 1_000),
        'deliveries resumed after the hold',
      );
    } finally {
      await worker.stop();
      await deactivate(held);
    }
  });

  it('signs with every key until the expiry promised for it, over two rotations', async () => {
    const clock = new ManualClock('2026-11-27T08:00:00.000Z');
    const own = await createWebhookTestContext(backend, {}, { clock });
    const receiverOwn = await HttpsReceiver.start();
    const worker = startWorker(own.runtime, { pollIntervalMs: 50 });
    const monitor = new WorkerMonitor(worker.worker);
    try {
      const owner = await createTenant(own, { tier: 'pro' });
      const created = await own.api('POST', '/api/v1/webhooks', {
        token: owner.token,
        body: { url: receiverOwn.url('/keys'), events: ['client.created'] },
      });
      const id = created.json().data.id as string;
      const keys = [created.json().signingKey as string];
      const expiries: string[] = [];
      const rotate = async () => {
        const rotated = await own.api('POST', `/api/v1/webhooks/${id}/rotate-key`, {
          token: owner.token,
        });
        assert.equal(rotated.statusCode, 200, rotated.body);
        keys.push(rotated.json().signingKey);
        expiries.push(rotated.json().legacySigningKeyExpiresAt);
      };
      /** The keys whose v1 signature the next delivery carries, by index in `keys`. */
      const signedBy = async () => {
        const before = receiverOwn.requests.length;
        await own.api('POST', '/api/v1/clients', {
          token: owner.token,
          body: { kind: 'individual', displayName: 'Keys' },
        });
        const [request] = (await receiverOwn.waitFor(before + 1)).slice(before);
        const header = String(request.headers['service-signature']);
        const t = /t=(\d+)/.exec(header)?.[1];
        const v1 = [...header.matchAll(/v1=([0-9a-f]{64})/g)].map((m) => m[1]);
        return keys
          .map((key, index) => ({
            index,
            mac: createHmac('sha256', key).update(`${t}.${request.body}`).digest('hex'),
          }))
          .filter(({ mac }) => v1.includes(mac))
          .map(({ index }) => index);
      };
      await rotate(); // key 0 retired until 08:00 + 24 h
      clock.advance(3_600_000);
      await rotate(); // key 1 retired until 09:00 + 24 h; key 0 keeps its promise
      assert.deepEqual(expiries, ['2026-11-28T08:00:00.000Z', '2026-11-28T09:00:00.000Z']);
      assert.deepEqual(await signedBy(), [0, 1, 2]);
      clock.set('2026-11-28T07:59:59.000Z');
      assert.deepEqual(await signedBy(), [0, 1, 2]);
      clock.set('2026-11-28T08:00:01.000Z');
      assert.deepEqual(await signedBy(), [1, 2]);
      clock.set('2026-11-28T09:00:01.000Z');
      assert.deepEqual(await signedBy(), [2]);
      assert.equal((await monitor.recorded(id, 'success')).status, 200);
    } finally {
      await worker.stop();
      await receiverOwn.close();
      await own.close();
    }
  });
});
