import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startWorker } from '../src/webhooks/start-worker.ts';
import { BACKENDS, createTestContext, type TestContext } from './helpers/context.ts';
import { createTenant, type TenantFixture } from './helpers/fixtures.ts';
import { HttpsReceiver, type Responder, testCa } from './helpers/https-receiver.ts';
import { until } from './helpers/until.ts';

// Adaptive concurrency per subscription, with real HTTPS receivers and the real worker: each
// test writes its backlog first, then drains it with a worker of its own.

interface DeliveryState {
  concurrencyLimit: number;
  inFlight: number;
  pausedUntil: string | null;
  reason: string | null;
}

/** A receiver that answers after `delayMs`, counting the requests it holds open at once. */
function countingResponder(delayMs: number, answer: (open: number) => number) {
  const seen = { open: 0, most: 0, refused: 0 };
  const responder: Responder = () => {
    seen.open += 1;
    seen.most = Math.max(seen.most, seen.open);
    const status = answer(seen.open);
    if (status >= 500) seen.refused += 1;
    // Counted closed just before the answer leaves (this timer was set first).
    setTimeout(() => {
      seen.open -= 1;
    }, delayMs);
    return { status, delayMs };
  };
  return { seen, responder };
}

for (const backend of BACKENDS) {
  describe(`adaptive concurrency per subscription (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;

    before(async () => {
      const ca = await testCa();
      ctx = await createTestContext(backend, {
        env: {
          WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
          WEBHOOK_CA_FILE: ca.caFile,
          WEBHOOK_RETRY_SCHEDULE: '200ms,200ms,200ms,200ms',
        },
      });
      tenant = await createTenant(ctx, { tier: 'pro' });
      await ctx.admin('PATCH', `/admin/v1/tenants/${tenant.id}`, { webhookEndpointCap: 20 });
    });
    after(async () => {
      await ctx.close();
    });

    const subscribe = async (url: string, extra: Record<string, unknown> = {}) => {
      const created = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url, events: ['client.created'], ...extra },
      });
      assert.equal(created.statusCode, 201, created.body);
      return created.json().data as { id: string; deliveryState: DeliveryState };
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
    const drain = async (id: string, events: number) => {
      const worker = startWorker(ctx.runtime, { pollIntervalMs: 50 });
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
          30_000,
          `${events} deliveries`,
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

    it('refuses a maxConcurrency outside 1-64, at creation and by PATCH, changing nothing', async () => {
      const receiver = await HttpsReceiver.start();
      try {
        for (const maxConcurrency of [0, 65, 2.5, '8', null]) {
          const refused = await ctx.api('POST', '/api/v1/webhooks', {
            token: tenant.token,
            body: { url: receiver.url('/bad'), events: ['client.created'], maxConcurrency },
          });
          assert.equal(refused.statusCode, 422, String(maxConcurrency));
          assert.match(String(refused.headers['content-type']), /^application\/problem\+json/);
        }
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
      } finally {
        await receiver.close();
      }
    });

    it('settles near the capacity of an endpoint that answers 503 above 3 at once', async () => {
      const { seen, responder } = countingResponder(25, (open) => (open > 3 ? 503 : 200));
      const receiver = await HttpsReceiver.start({ responder });
      try {
        const { id } = await subscribe(receiver.url('/three'));
        await backlog(200);
        const limits = await drain(id, 200);
        // Never above 5; below 2 only for a moment (a reset connection is a push back too).
        const settled = limits.slice(Math.floor(limits.length / 4));
        const low = settled.filter((limit) => limit < 2).length;
        assert.ok(
          settled.every((limit) => limit <= 5) && low <= settled.length / 10,
          `limits seen: ${limits.join(',')}`,
        );
        const wasted = seen.refused / receiver.requests.length;
        assert.ok(wasted < 0.2, `${seen.refused} of ${receiver.requests.length} refused`);
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
      const { seen, responder } = countingResponder(15, () => 200);
      const receiver = await HttpsReceiver.start({ responder });
      try {
        const { id } = await subscribe(receiver.url('/fast'), { maxConcurrency: 10 });
        await backlog(200);
        await drain(id, 200);
        const state = await stateOf(id);
        assert.equal(state.concurrencyLimit, 10);
        assert.equal(state.reason, null);
        assert.ok(seen.most <= 10 && seen.most > 4, `${seen.most} requests at once`);
      } finally {
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
      try {
        const { id } = await subscribe(receiver.url('/pushing-back'));
        await backlog(1);
        const cut = await until(async () => {
          const state = await stateOf(id);
          return state.reason === 'backpressure' ? state : undefined;
        });
        assert.equal(cut.concurrencyLimit, 2);
        answer = 429;
        const answeredAt = Date.now();
        const held = await until(async () => {
          const state = await stateOf(id);
          return state.reason === 'retry_after' ? state : undefined;
        });
        const pausedFor = Date.parse(held.pausedUntil as string) - answeredAt;
        assert.ok(Math.abs(pausedFor - 30_000) < 5_000, `paused for ${pausedFor} ms`);
        assert.equal(held.concurrencyLimit, 1);
      } finally {
        await worker.stop();
        await receiver.close();
      }
    });
  });
}
