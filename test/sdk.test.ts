import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { sdkTypes } from '../scripts/sdk-types.ts';
import {
  TourOps,
  TourOpsError,
  verifyWebhook,
  WebhookVerificationError,
} from '../sdk/src/index.ts';
import { startWorker } from '../src/start-worker.ts';
import { BACKENDS, createWebhookTestContext, type TestContext } from './helpers/context.ts';
import { createTenant, type TenantFixture } from './helpers/fixtures.ts';
import { HttpsReceiver } from './helpers/https-receiver.ts';
import { until } from './helpers/until.ts';

// The TypeScript SDK (sdk/) against a real server on loopback, on each backend.

describe('the SDK types', () => {
  it('are what openapi-typescript generates from the served document today', async () => {
    assert.equal(
      readFileSync('sdk/src/api.d.ts', 'utf8'),
      await sdkTypes(),
      'sdk/src/api.d.ts is stale: run npm run sdk:types',
    );
  });
});

for (const backend of BACKENDS) {
  describe(`the SDK against a real server (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let baseUrl: string;
    let receiver: HttpsReceiver;
    let worker: ReturnType<typeof startWorker>;

    before(async () => {
      ctx = await createWebhookTestContext(backend, { WEBHOOK_RETRY_SCHEDULE: '30ms' });
      tenant = await createTenant(ctx, { tier: 'pro' });
      await ctx.app.listen({ port: 0, host: '127.0.0.1' });
      baseUrl = `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}`;
      receiver = await HttpsReceiver.start();
      worker = startWorker(ctx.runtime, { pollIntervalMs: 50 });
    });
    after(async () => {
      await worker.stop();
      await receiver.close();
      await ctx.close();
    });

    const api = (options: Partial<ConstructorParameters<typeof TourOps>[0]> = {}) =>
      new TourOps({ token: tenant.token, baseUrl, retryBaseDelayMs: 10, ...options });
    const tripBody = (title: string) => ({
      title,
      startDate: '2027-04-12',
      daysCount: 3,
      startCityId: tenant.cityIds[0],
      endCityId: tenant.cityIds[1],
    });

    it('reads, creates and iterates every page of a list', async () => {
      const me = await api().me();
      assert.equal(me.tenant?.id, tenant.id);
      const created = [];
      for (let i = 0; i < 5; i++) created.push(await api().trips.create(tripBody(`SDK ${i}`)));
      assert.equal((await api().trips.get(created[0].id)).title, 'SDK 0');
      const seen = [];
      for await (const trip of api().trips.list({ pageSize: 2 })) seen.push(trip.id);
      for (const trip of created) assert.ok(seen.includes(trip.id));
      assert.equal(new Set(seen).size, seen.length, 'no trip twice across pages');
      // `limit` is how many in all, across pages of `pageSize`.
      const three = [];
      for await (const trip of api().trips.list({ limit: 3, pageSize: 2 })) three.push(trip.id);
      assert.deepEqual(three, seen.slice(0, 3));
      const one = [];
      for await (const trip of api().trips.list({ limit: 1 })) one.push(trip.id);
      assert.deepEqual(one, seen.slice(0, 1));
      // Every list iterates, the unpaginated one too.
      await api().webhooks.create({ url: receiver.url('/listed'), events: ['trip.published'] });
      const subscriptions = [];
      for await (const subscription of api().webhooks.list()) subscriptions.push(subscription.url);
      assert.ok(subscriptions.includes(receiver.url('/listed')));
    });

    it('throws one error class carrying the problem', async () => {
      const error = await api()
        .trips.create({ ...tripBody('Bad'), startDate: '2027-02-30' })
        .catch((e: unknown) => e);
      assert.ok(error instanceof TourOpsError);
      assert.equal(error.status, 422);
      assert.match(error.type, /\/errors\/validation-failed$/);
      assert.ok(error.errors?.startDate);
      assert.match(error.requestId ?? '', /.+/);
      const missing = await api()
        .trips.get('trp_01JDZZZZZZZZZZZZZZZZZZZZZZ')
        .catch((e: unknown) => e);
      assert.ok(missing instanceof TourOpsError && missing.status === 404);
      const unauthorized = await api({ token: 'tk_test_00000000000000000000000000' })
        .me()
        .catch((e: unknown) => e);
      assert.ok(unauthorized instanceof TourOpsError && unauthorized.status === 401);
    });

    it('retries a write on a network error, a 503 and a 429 with the same key: it runs once', async () => {
      const keys: string[] = [];
      const failures = ['network', 503, 429];
      const retryAfterWaits: number[] = [];
      let lastAttemptAt = 0;
      const flaky = api({
        fetch: async (request) => {
          keys.push(request.headers.get('idempotency-key') ?? '');
          const failure = failures.shift();
          if (failure === 'network') throw new TypeError('fetch failed');
          // The server did the work, but the answer was lost on the way back.
          const response = await fetch(request);
          if (failure === 503) return new Response('', { status: 503 });
          if (failure === 429) {
            lastAttemptAt = performance.now();
            return new Response('', { status: 429, headers: { 'retry-after': '1' } });
          }
          if (lastAttemptAt > 0) retryAfterWaits.push(performance.now() - lastAttemptAt);
          return response;
        },
      });
      const before = await ctx.runtime.repositories.trips.count(tenant.id);
      const trip = await flaky.trips.create(tripBody('Retried'));
      assert.equal(keys.length, 4);
      assert.equal(new Set(keys).size, 1, 'one Idempotency-Key on every attempt');
      assert.match(keys[0], /^[0-9a-f-]{36}$/);
      assert.equal(await ctx.runtime.repositories.trips.count(tenant.id), before + 1);
      assert.equal(trip.title, 'Retried');
      assert.ok(retryAfterWaits[0] >= 950, `waited ${retryAfterWaits[0]} ms for Retry-After: 1`);
      // Bounded: a server that keeps failing ends in the error, after maxAttempts.
      let calls = 0;
      const down = api({
        maxAttempts: 3,
        fetch: async () => {
          calls += 1;
          return new Response(
            JSON.stringify({ type: 'x/internal', title: 'Internal', detail: '' }),
            {
              status: 500,
              headers: { 'content-type': 'application/problem+json' },
            },
          );
        },
      });
      await assert.rejects(down.trips.get('trp_x'), (e: unknown) => e instanceof TourOpsError);
      assert.equal(calls, 3);
    });

    it('verifies a real signed delivery, during a rotation, and refuses a tampered or stale one', async () => {
      const created = await api().webhooks.create({
        url: receiver.url('/sdk'),
        events: ['client.created'],
      });
      const firstKey = created.signingKey;
      await api().clients.create({ kind: 'individual', displayName: 'Verified' });
      const [delivery] = await until(async () =>
        receiver.requests.filter((r) => r.path === '/sdk').length > 0
          ? receiver.requests.filter((r) => r.path === '/sdk')
          : undefined,
      );
      const event = verifyWebhook(delivery.body, delivery.headers, firstKey);
      assert.equal(event.type, 'client.created');
      if (event.type === 'client.created') assert.equal(event.data.displayName, 'Verified');

      // A rotation: the next delivery carries both signatures; either key verifies it.
      const rotated = await api().webhooks.rotateKey(created.data.id);
      await api().clients.create({ kind: 'individual', displayName: 'Rotated' });
      const second = await until(async () => receiver.requests.filter((r) => r.path === '/sdk')[1]);
      for (const keys of [[firstKey], [rotated.signingKey], [firstKey, rotated.signingKey]]) {
        assert.equal(verifyWebhook(second.body, second.headers, keys).type, 'client.created');
      }
      assert.throws(
        () =>
          verifyWebhook(second.body, second.headers, 'whsec_not-the-key-0000000000000000000000'),
        WebhookVerificationError,
      );
      const tampered = second.body.replace('Rotated', 'Rotatee');
      assert.throws(
        () => verifyWebhook(tampered, second.headers, rotated.signingKey),
        WebhookVerificationError,
      );
      const t = Number(/t=(\d+)/.exec(String(second.headers['service-signature']))?.[1]);
      assert.throws(
        () => verifyWebhook(second.body, second.headers, rotated.signingKey, { now: t + 301 }),
        /more than 300 s/,
      );
      assert.throws(
        () => verifyWebhook(second.body, second.headers, rotated.signingKey, { now: t - 301 }),
        /more than 300 s/,
      );
      assert.ok(verifyWebhook(second.body, second.headers, rotated.signingKey, { now: t + 299 }));

      // Standard Webhooks on: the other header set alone verifies too (a proxy that drops ours).
      const updated = await api().webhooks.update(created.data.id, { standardWebhooks: true });
      assert.equal(updated.standardWebhooks, true);
      await api().clients.create({ kind: 'individual', displayName: 'Standard' });
      const third = await until(async () => receiver.requests.filter((r) => r.path === '/sdk')[2]);
      const { 'service-signature': _ours, ...standardOnly } = third.headers;
      const standard = verifyWebhook(third.body, standardOnly, [rotated.signingKey]);
      assert.equal(standard.type, 'client.created');
      assert.equal(typeof standard.sequence, 'number');
      assert.throws(
        () =>
          verifyWebhook(
            third.body.replace('Standard', 'Standarx'),
            standardOnly,
            rotated.signingKey,
          ),
        WebhookVerificationError,
      );
      // And the pull API returns the same event under the same sequence.
      const page = await api().webhooks.events(created.data.id, { after: 0 });
      assert.ok(
        page.data.some((item) => item.id === standard.id && item.sequence === standard.sequence),
      );
    });

    it('fires a typed test event that verifyWebhook returns as that type', async () => {
      const created = await api().webhooks.create({
        url: receiver.url('/sdk-test'),
        events: ['booking.confirmed'],
      });
      await api().webhooks.test({ subscriptionId: created.data.id, eventType: 'payment.failed' });
      const delivery = await until(async () =>
        receiver.requests.find((r) => r.path === '/sdk-test'),
      );
      const event = verifyWebhook(delivery.body, delivery.headers, created.signingKey);
      assert.equal(event.type, 'payment.failed');
      assert.equal(event.test, true);
    });

    it('sets a payload filter and dry-runs one, typed', async () => {
      const created = await api().webhooks.create({
        url: receiver.url('/sdk-filter'),
        events: ['client.created'],
        filter: { 'data.kind': 'company' },
      });
      assert.deepEqual(created.data.filter, { 'data.kind': 'company' });
      const tried = await api().webhooks.testFilter({
        filter: { 'data.displayName': { $prefix: 'A' } },
        event: { type: 'client.created', data: { displayName: 'Ana Lima' } },
      });
      assert.equal(tried.matches, true);
      const ledger = await api().webhooks.testFilter({
        filter: null,
        subscriptionId: created.data.id,
      });
      assert.deepEqual(ledger, { matches: false, events: [] });
      const refused = await api()
        .webhooks.testFilter({
          filter: { 'data.kind': { $gt: 'x' } },
          event: { type: 'client.created', data: {} },
        })
        .catch((error: unknown) => error);
      assert.ok(refused instanceof TourOpsError);
      assert.equal(refused.status, 422);
    });
  });
}
