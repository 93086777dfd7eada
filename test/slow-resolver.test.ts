import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, it } from 'node:test';
import type { Database } from '../src/db/database.ts';
import type { Resolver } from '../src/domain/address-guard.ts';
import { startWorker } from '../src/start-worker.ts';
import { TIMER_SLACK_MS } from './helpers/clock.ts';
import {
  createTestContext,
  createWebhookTestContext,
  describeEachBackend,
  type TestContext,
} from './helpers/context.ts';
import { deliveryRows } from './helpers/delivery-rows.ts';
import { createTenant, type TenantFixture } from './helpers/fixtures.ts';
import { HttpsReceiver } from './helpers/https-receiver.ts';
import { until } from './helpers/until.ts';

/** Longer than any wait here: the names hang until the test lets them resolve. */
const DNS_TIMEOUT_MS = 60_000;

describeEachBackend('a resolver that never answers', (backend) => {
  let ctx: TestContext;
  let receiver: HttpsReceiver;
  let worker: ReturnType<typeof startWorker>;
  let slow: TenantFixture;
  let other: TenantFixture;
  let database: Database | null = null;
  /** Resolutions asked for while a transaction was open in the asking context. */
  const insideTransactions: string[] = [];
  /** Names asked for that hang, until `letGo`. */
  const hanging: string[] = [];
  let letGo = () => {};
  const released = new Promise<void>((resolve) => {
    letGo = resolve;
  });
  const resolver: Resolver = async (hostname) => {
    if (database?.inTransaction()) insideTransactions.push(hostname);
    if (hostname === 'localhost') return ['127.0.0.1'];
    hanging.push(hostname);
    await released;
    return ['127.0.0.1'];
  };

  before(async () => {
    receiver = await HttpsReceiver.start();
    ctx = await createWebhookTestContext(
      backend,
      { WEBHOOK_DNS_TIMEOUT: `${DNS_TIMEOUT_MS}ms` },
      { resolver },
    );
    database = ctx.runtime.database;
    slow = await createTenant(ctx);
    other = await createTenant(ctx);
    // The other tenant's endpoint has a name (its certificate's): every delivery to it resolves
    // at connect time, through the same resolver.
    const hook = await ctx.api('POST', '/api/v1/webhooks', {
      token: other.token,
      body: { url: `https://localhost:${receiver.port}/hook`, events: ['client.created'] },
    });
    assert.equal(hook.statusCode, 201, hook.body);
    worker = startWorker(ctx.runtime, { pollIntervalMs: 20 });
  });
  after(async () => {
    await worker?.stop();
    await ctx?.close();
    await receiver?.close();
  });

  /** The other tenant reads and writes (keyed, emitting events), four clients at once. */
  const otherTenantRequests = async (perClient: number): Promise<void> => {
    const client = async (n: number) => {
      for (let i = 0; i < perClient; i++) {
        const response =
          (i + n) % 2 === 0
            ? await ctx.api('GET', '/api/v1/trips?limit=10', { token: other.token })
            : await ctx.api('POST', '/api/v1/clients', {
                token: other.token,
                headers: { 'idempotency-key': randomUUID() },
                body: { kind: 'individual', displayName: `Client ${n}.${i}` },
              });
        assert.ok(response.statusCode < 300, response.body);
      }
    };
    await Promise.all([0, 1, 2, 3].map(client));
  };

  it("holds no other request while one tenant's names hang", async () => {
    // Eight registrations at once, half keyed, on names that hang until let go.
    const registrations = Array.from({ length: 8 }, (_, i) =>
      ctx.api('POST', '/api/v1/webhooks', {
        token: slow.token,
        headers: i % 2 === 0 ? { 'idempotency-key': randomUUID() } : {},
        body: { url: `https://hangs.slow.test/hook/${i}`, events: ['trip.published'] },
      }),
    );
    // All eight asked while none can have been answered: each waits for its own, not in turn.
    await until(() => (hanging.length >= 8 ? true : undefined), 'eight names asked');
    // The other tenant's reads and keyed writes, all answered while the names hang: none waits.
    await otherTenantRequests(10);
    letGo();
    for (const response of await Promise.all(registrations)) {
      assert.equal(response.statusCode, 201, response.body);
    }
    assert.deepEqual(insideTransactions, []);
  });

  it('bounds the wait for a name by WEBHOOK_DNS_TIMEOUT', async () => {
    const never: Resolver = () => new Promise(() => {});
    const bounded = await createTestContext(backend, {
      env: { WEBHOOK_DNS_TIMEOUT: '1s' },
      resolver: never,
    });
    try {
      const tenant = await createTenant(bounded);
      const started = performance.now();
      const response = await bounded.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: 'https://hangs.slow.test/hook', events: ['trip.published'] },
      });
      const ms = performance.now() - started;
      assert.equal(response.statusCode, 422, response.body);
      assert.deepEqual(response.json().errors, {
        url: ['host name did not resolve within 1 s'],
      });
      // The time-out is a floor the machine's load cannot lower.
      assert.ok(ms >= 1_000 - TIMER_SLACK_MS, `answered in ${ms} ms`);
    } finally {
      await bounded.close();
    }
  });

  it("delivered the other tenant's events meanwhile, resolving its name at connect time", async () => {
    const pending = () =>
      deliveryRows(ctx.runtime.database.db)
        .select('id')
        .where('tenantId', '=', other.id)
        .where('status', '!=', 'success')
        .execute();
    await until(
      async () => ((await pending()).length === 0 ? true : undefined),
      "the other tenant's deliveries",
    );
    assert.ok(receiver.requests.length > 0);
    assert.deepEqual(insideTransactions, []);
  });
});
