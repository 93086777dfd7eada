import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import type { SettledAttempt } from '../src/delivery/types.ts';
import { startWorker } from '../src/start-worker.ts';
import {
  createWebhookTestContext,
  describeEachBackend,
  type TestContext,
} from './helpers/context.ts';
import { createTenant, type TenantFixture } from './helpers/fixtures.ts';
import { HttpsReceiver } from './helpers/https-receiver.ts';
import { eventually, until } from './helpers/until.ts';

// A receiver's Retry-After on 429 and 503, with a real HTTPS receiver and the real worker. When
// each retry is due is read from the worker's own decision (its `attempted` event: the attempt's
// end and the outcome's nextAttemptAt); the receiver shows that no retry came before it.

describeEachBackend('Retry-After from receivers', (backend) => {
  let ctx: TestContext;
  let tenant: TenantFixture;
  let receiver: HttpsReceiver;
  let worker: ReturnType<typeof startWorker>;
  type Answer = { status: number; headers?: Record<string, string> };
  /** The answer to each path's first attempt; later attempts get 204. */
  const firstAnswers = new Map<string, Answer>();
  /** The answer to a path's very first request only. */
  const onceAnswers = new Map<string, Answer>();
  let other: TenantFixture;
  /** When each request arrived, on the clock the worker's decisions are in (epoch ms). */
  const arrivals = new WeakMap<object, number>();
  /** Every attempt the worker settled, as it decided its outcome. */
  const settled: SettledAttempt[] = [];

  before(async () => {
    // One second between attempts: a longer Retry-After shows.
    ctx = await createWebhookTestContext(backend, { WEBHOOK_RETRY_SCHEDULE: '1s,1s' });
    tenant = await createTenant(ctx, { tier: 'pro' });
    await ctx.admin('PATCH', `/admin/v1/tenants/${tenant.id}`, { webhookEndpointCap: 20 });
    other = await createTenant(ctx, { tier: 'pro' });
    receiver = await HttpsReceiver.start({
      responder: (r) => {
        arrivals.set(r, Date.now());
        const once = onceAnswers.get(r.path);
        if (once) {
          onceAnswers.delete(r.path);
          return once;
        }
        return (
          (r.headers['service-delivery-attempt'] === '1' && firstAnswers.get(r.path)) || {
            status: 204,
          }
        );
      },
    });
    worker = startWorker(ctx.runtime, { pollIntervalMs: 50 });
    worker.worker.on('attempted', (attempt) => settled.push(attempt));
  });
  after(async () => {
    await worker.stop();
    await receiver.close();
    await ctx.close();
  });

  const subscribe = async (path: string, owner = tenant) => {
    const created = await ctx.api('POST', '/api/v1/webhooks', {
      token: owner.token,
      body: { url: receiver.url(path), events: ['client.created'] },
    });
    assert.equal(created.statusCode, 201);
    return created;
  };
  const createClients = (owner: TenantFixture, n: number) =>
    Promise.all(
      Array.from({ length: n }, (_, i) =>
        ctx.api('POST', '/api/v1/clients', {
          token: owner.token,
          body: { kind: 'individual', displayName: `Client ${i}` },
        }),
      ),
    );
  const to = (path: string) => receiver.requests.filter((r) => r.path === path);

  /** A new subscription at `path` whose first attempt gets `first`, sent a test event; its id. */
  async function fireTest(path: string, first: Answer): Promise<string> {
    const id = (await subscribe(path)).json().data.id;
    firstAnswers.set(path, first);
    await ctx.api('POST', '/api/v1/webhooks/test', {
      token: tenant.token,
      body: { subscriptionId: id },
    });
    return id;
  }

  /**
   * Fires a test event at `path`, whose first attempt gets `first`: how long after that attempt
   * ended the worker made its retry due, and when the retry arrived (epoch ms).
   */
  async function retry(path: string, first: Answer) {
    await fireTest(path, first);
    const [, second] = await until(async () => {
      const got = receiver.requests.filter((r) => r.path === path);
      return got.length >= 2 ? got : undefined;
    }, `two attempts to ${path}`);
    const decided = settled.find((a) => a.delivery.url.endsWith(path) && a.delivery.attempts === 1);
    assert.ok(decided?.outcome.nextAttemptAt, `the first attempt to ${path} was retried`);
    const endedMs = Date.parse(decided.at);
    const dueMs = Date.parse(decided.outcome.nextAttemptAt);
    // The retry never goes before it is due (the receiver runs in this process: one clock).
    const arrivedMs = arrivals.get(second) as number;
    assert.ok(arrivedMs >= dueMs, `arrived ${dueMs - arrivedMs} ms early`);
    return { endedMs, dueMs, waitMs: dueMs - endedMs };
  }

  it('retries at the Retry-After of a 429 when it is later than the scheduled wait', async () => {
    const { waitMs } = await retry('/ra-429', { status: 429, headers: { 'retry-after': '2' } });
    assert.equal(waitMs, 2_000);
  });

  it("keeps each attempt's Retry-After in its log", async () => {
    const id = await fireTest('/ra-logged', { status: 503, headers: { 'retry-after': '1' } });
    const url = `/api/v1/webhooks/${id}/deliveries`;
    const delivery = await until(async () => {
      const [row] = (await ctx.api('GET', url, { token: tenant.token })).json().data;
      return row?.status === 'success' ? row : undefined;
    });
    const attempts = (
      await ctx.api('GET', `${url}/${delivery.id}/attempts`, { token: tenant.token })
    ).json().data;
    assert.deepEqual(
      attempts.map((a: { status: number; retryAfter: string | null }) => [a.status, a.retryAfter]),
      [
        [204, null],
        [503, '1'],
      ],
    );
  });

  it('reads the HTTP-date form', async () => {
    const at = new Date(Date.now() + 3_000).toUTCString();
    const { endedMs, dueMs } = await retry('/ra-date', {
      status: 503,
      headers: { 'retry-after': at },
    });
    // Due at the date, unless the scheduled second ends later (the answer came that late).
    assert.equal(dueMs, Math.max(Date.parse(at), endedMs + 1_000));
  });

  it('holds the whole endpoint for the Retry-After; other tenants keep receiving', async () => {
    const held = await subscribe('/held');
    await subscribe('/not-held', other);
    onceAnswers.set('/held', { status: 429, headers: { 'retry-after': '3' } });
    await ctx.api('POST', '/api/v1/webhooks/test', {
      token: tenant.token,
      body: { subscriptionId: held.json().data.id },
    });
    const [answered] = await until(async () => (to('/held').length > 0 ? to('/held') : undefined));
    // Events for both endpoints while the first is held.
    await createClients(tenant, 3);
    await createClients(other, 3);
    await eventually(() => to('/not-held').length >= 3);
    assert.equal(to('/held').length, 1, 'nothing to the held endpoint meanwhile');
    // After the hold: the test fire's retry and the three events.
    const after = await until(
      async () => (to('/held').length >= 5 ? to('/held') : undefined),
      'the held deliveries',
    );
    const first = Math.min(...after.slice(1).map((r) => r.receivedAt));
    assert.ok(
      first - answered.receivedAt >= 2_950,
      `sent ${Math.round(first - answered.receivedAt)} ms after the 429`,
    );
  });

  it('cuts a Retry-After of a day to an hour, for the endpoint and the delivery', async () => {
    const id = await fireTest('/ra-day', { status: 503, headers: { 'retry-after': '86400' } });
    const row = await until(async () => {
      const subscription = await ctx.runtime.repositories.webhooks.findSubscription(tenant.id, id);
      return subscription?.heldUntil ? subscription : undefined;
    });
    const decided = settled.find((a) => a.delivery.subscriptionId === id);
    assert.ok(decided);
    const endedMs = Date.parse(decided.at);
    assert.equal(Date.parse(decided.holdUntil as string) - endedMs, 3_600_000);
    assert.equal(Date.parse(row.heldUntil as string), Date.parse(decided.holdUntil as string));
    const [delivery] = (
      await ctx.api('GET', `/api/v1/webhooks/${id}/deliveries`, { token: tenant.token })
    ).json().data;
    assert.equal(Date.parse(delivery.nextAttemptAt) - endedMs, 3_600_000);
  });

  it('keeps to the schedule without a Retry-After, or on other statuses', async () => {
    assert.equal((await retry('/ra-none', { status: 429 })).waitMs, 1_000);
    const other = await retry('/ra-500', { status: 500, headers: { 'retry-after': '2' } });
    assert.equal(other.waitMs, 1_000);
  });
});
