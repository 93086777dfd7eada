import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startWorker } from '../src/webhooks/start-worker.ts';
import { BACKENDS, createTestContext, type TestContext } from './helpers/context.ts';
import { createTenant, type TenantFixture } from './helpers/fixtures.ts';
import { HttpsReceiver, testCa } from './helpers/https-receiver.ts';
import { until } from './helpers/until.ts';

// A receiver's Retry-After on 429 and 503, with a real HTTPS receiver and the real worker.

for (const backend of BACKENDS) {
  describe(`Retry-After from receivers (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let receiver: HttpsReceiver;
    let worker: ReturnType<typeof startWorker>;
    /** The answer to each path's first attempt; later attempts get 204. */
    const firstAnswers = new Map<string, { status: number; headers?: Record<string, string> }>();

    before(async () => {
      const ca = await testCa();
      ctx = await createTestContext(backend, {
        env: {
          WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
          WEBHOOK_CA_FILE: ca.caFile,
          // One second between attempts, so twice it (the cap) is two.
          WEBHOOK_RETRY_SCHEDULE: '1s,1s',
        },
      });
      tenant = await createTenant(ctx, { tier: 'pro' });
      await ctx.admin('PATCH', `/admin/v1/tenants/${tenant.id}`, { webhookEndpointCap: 20 });
      receiver = await HttpsReceiver.start({
        responder: (r) =>
          (r.headers['service-delivery-attempt'] === '1' && firstAnswers.get(r.path)) || {
            status: 204,
          },
      });
      worker = startWorker(ctx.runtime, { pollIntervalMs: 50 });
    });
    after(async () => {
      await worker.stop();
      await receiver.close();
      await ctx.close();
    });

    /** The gap between the first two attempts to `path`, whose first answer is `first`. */
    async function gap(path: string, first: { status: number; headers?: Record<string, string> }) {
      const created = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: receiver.url(path), events: ['client.created'] },
      });
      assert.equal(created.statusCode, 201);
      firstAnswers.set(path, first);
      await ctx.api('POST', '/api/v1/webhooks/test', {
        token: tenant.token,
        body: { subscriptionId: created.json().data.id },
      });
      const [one, two] = await until(
        async () => {
          const got = receiver.requests.filter((r) => r.path === path);
          return got.length >= 2 ? got : undefined;
        },
        8_000,
        `two attempts to ${path}`,
      );
      return two.receivedAt - one.receivedAt;
    }

    it('waits at least the Retry-After of a 429, within twice the scheduled wait', async () => {
      const waited = await gap('/ra-429', { status: 429, headers: { 'retry-after': '2' } });
      assert.ok(waited >= 1_900 && waited < 3_500, `waited ${Math.round(waited)} ms`);
    });

    it('caps a longer Retry-After of a 503 at twice the scheduled wait', async () => {
      const waited = await gap('/ra-503', { status: 503, headers: { 'retry-after': '3600' } });
      assert.ok(waited >= 1_900 && waited < 3_500, `waited ${Math.round(waited)} ms`);
    });

    it('keeps to the schedule without a Retry-After, or on other statuses', async () => {
      const plain = await gap('/ra-none', { status: 429 });
      assert.ok(plain >= 900 && plain < 1_800, `waited ${Math.round(plain)} ms`);
      const other = await gap('/ra-500', { status: 500, headers: { 'retry-after': '2' } });
      assert.ok(other >= 900 && other < 1_800, `waited ${Math.round(other)} ms`);
    });
  });
}
