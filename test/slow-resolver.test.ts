import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, it } from 'node:test';
import type { Database } from '../src/db/database.ts';
import type { Resolver } from '../src/domain/address-guard.ts';
import { startWorker } from '../src/start-worker.ts';
import {
  createWebhookTestContext,
  describeEachBackend,
  type TestContext,
} from './helpers/context.ts';
import { createTenant, type TenantFixture } from './helpers/fixtures.ts';
import { HttpsReceiver } from './helpers/https-receiver.ts';
import { until } from './helpers/until.ts';

/**
 * Long beside the other tenant's few dozen requests, so that they are all answered while the
 * names hang however loaded the machine (the order of the answers is what is checked).
 */
const DNS_TIMEOUT_MS = 3_000;

describeEachBackend('a resolver that never answers', (backend) => {
  let ctx: TestContext;
  let receiver: HttpsReceiver;
  let worker: ReturnType<typeof startWorker>;
  let slow: TenantFixture;
  let other: TenantFixture;
  let database: Database | null = null;
  /** Resolutions asked for while a transaction was open in the asking context. */
  const insideTransactions: string[] = [];
  /** Names asked for that hang. */
  const hanging: string[] = [];
  const resolver: Resolver = (hostname) => {
    if (database?.inTransaction()) insideTransactions.push(hostname);
    if (hostname === 'localhost') return Promise.resolve(['127.0.0.1']);
    hanging.push(hostname);
    return new Promise(() => {});
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

  it("holds no other request while one tenant's names hang, and bounds the wait", async () => {
    // Eight registrations at once, half keyed, on a name that never resolves.
    let firstAnswered = false;
    const registrations = Array.from({ length: 8 }, async (_, i) => {
      const started = performance.now();
      const response = await ctx.api('POST', '/api/v1/webhooks', {
        token: slow.token,
        headers: i % 2 === 0 ? { 'idempotency-key': randomUUID() } : {},
        body: { url: `https://hangs.slow.test/hook/${i}`, events: ['trip.published'] },
      });
      firstAnswered = true;
      return { response, ms: performance.now() - started };
    });
    await until(() => (hanging.length >= 8 ? true : undefined), 10_000, 'eight names asked');
    // Each asked for its own name before any was answered: not one after another.
    assert.equal(firstAnswered, false, 'a registration was answered before all had asked');
    // The other tenant's requests, all answered while the names still hang: none waited.
    await otherTenantRequests(10);
    assert.equal(firstAnswered, false, "the other tenant's requests waited for the names");
    for (const { response, ms } of await Promise.all(registrations)) {
      assert.equal(response.statusCode, 422, response.body);
      assert.deepEqual(response.json().errors, {
        url: [`host name did not resolve within ${DNS_TIMEOUT_MS / 1000} s`],
      });
      // The time-out is a floor the machine's load cannot lower.
      assert.ok(ms >= DNS_TIMEOUT_MS - 1, `answered in ${ms} ms`);
    }
    assert.deepEqual(insideTransactions, []);
  });

  it("delivered the other tenant's events meanwhile, resolving its name at connect time", async () => {
    const pending = () =>
      ctx.runtime.database.db
        .selectFrom('webhookDeliveries')
        .select('id')
        .where('tenantId', '=', other.id)
        .where('status', '!=', 'success')
        .execute();
    await until(
      async () => ((await pending()).length === 0 ? true : undefined),
      10_000,
      "the other tenant's deliveries",
    );
    assert.ok(receiver.requests.length > 0);
    assert.deepEqual(insideTransactions, []);
  });
});
