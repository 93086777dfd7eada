import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Database } from '../src/db/database.ts';
import type { Resolver } from '../src/domain/address-guard.ts';
import { startWorker } from '../src/start-worker.ts';
import { BACKENDS, createWebhookTestContext, type TestContext } from './helpers/context.ts';
import { createTenant, type TenantFixture } from './helpers/fixtures.ts';
import { HttpsReceiver } from './helpers/https-receiver.ts';

const DNS_TIMEOUT_MS = 1_000;
/** How long each measured window of the other tenant's traffic lasts (the names hang 1 s). */
const WINDOW_MS = 2_000;

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))];
}

for (const backend of BACKENDS) {
  describe(`a resolver that never answers (${backend})`, () => {
    let ctx: TestContext;
    let receiver: HttpsReceiver;
    let worker: ReturnType<typeof startWorker>;
    let slow: TenantFixture;
    let other: TenantFixture;
    let database: Database | null = null;
    /** Resolutions asked for while a transaction was open in the asking context. */
    const insideTransactions: string[] = [];
    const resolver: Resolver = (hostname) => {
      if (database?.inTransaction()) insideTransactions.push(hostname);
      if (hostname === 'localhost') return Promise.resolve(['127.0.0.1']);
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

    /** The other tenant reads and writes (keyed, emitting events) for a window; latencies. */
    const otherTenantWindow = async (): Promise<number[]> => {
      const latencies: number[] = [];
      const end = performance.now() + WINDOW_MS;
      const client = async (n: number) => {
        for (let i = 0; performance.now() < end; i++) {
          const started = performance.now();
          const response =
            (i + n) % 2 === 0
              ? await ctx.api('GET', '/api/v1/trips?limit=10', { token: other.token })
              : await ctx.api('POST', '/api/v1/clients', {
                  token: other.token,
                  headers: { 'idempotency-key': randomUUID() },
                  body: { kind: 'individual', displayName: `Client ${n}.${i}` },
                });
          latencies.push(performance.now() - started);
          assert.ok(response.statusCode < 300, response.body);
        }
      };
      await Promise.all([0, 1, 2, 3].map(client));
      return latencies;
    };

    /** Eight registrations at once, half keyed, on a name that never resolves. */
    const hangingRegistrations = () =>
      Array.from({ length: 8 }, async (_, i) => {
        const started = performance.now();
        const response = await ctx.api('POST', '/api/v1/webhooks', {
          token: slow.token,
          headers: i % 2 === 0 ? { 'idempotency-key': randomUUID() } : {},
          body: { url: `https://hangs.slow.test/hook/${i}`, events: ['trip.published'] },
        });
        return { response, ms: performance.now() - started };
      });

    it("holds no other request while one tenant's names hang, and bounds the wait", async () => {
      // Windows alone and beside the hanging names, interleaved three times: the suites running
      // beside this one load the machine in bursts, and a burst then lands on one window of each.
      const p99s = { alone: [] as number[], beside: [] as number[] };
      let slowest = 0;
      for (let round = 0; round < 3; round++) {
        p99s.alone.push(percentile(await otherTenantWindow(), 99));
        const registrations = hangingRegistrations();
        const beside = await otherTenantWindow();
        p99s.beside.push(percentile(beside, 99));
        slowest = Math.max(slowest, ...beside);
        for (const { response, ms } of await Promise.all(registrations)) {
          assert.equal(response.statusCode, 422, response.body);
          assert.deepEqual(response.json().errors, {
            url: ['host name did not resolve within 1 s'],
          });
          // Each waited for its own resolution, not for the others' one after another.
          assert.ok(ms >= DNS_TIMEOUT_MS && ms < 2 * DNS_TIMEOUT_MS, `answered in ${ms} ms`);
        }
      }
      // No request of the other tenant waited for a resolution (each takes the time-out)...
      assert.ok(slowest < DNS_TIMEOUT_MS, `the other tenant's slowest answer: ${slowest} ms`);
      // ...and its p99 stays within 2x of its own alone (the median window of each kind).
      const [alone, beside] = [p99s.alone, p99s.beside].map((values) => percentile(values, 50));
      assert.ok(
        beside <= 2 * Math.max(alone, 10),
        `the other tenant's p99: ${p99s.alone.map((v) => v.toFixed(1)).join(', ')} ms alone, ` +
          `${p99s.beside.map((v) => v.toFixed(1)).join(', ')} ms beside the hanging names`,
      );
      assert.deepEqual(insideTransactions, []);
    });

    it("delivered the other tenant's events meanwhile, resolving its name at connect time", async () => {
      const deadline = Date.now() + 10_000;
      const pending = () =>
        ctx.runtime.database.db
          .selectFrom('webhookDeliveries')
          .select('id')
          .where('tenantId', '=', other.id)
          .where('status', '!=', 'success')
          .execute();
      while ((await pending()).length > 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.deepEqual(await pending(), []);
      assert.ok(receiver.requests.length > 0);
      assert.deepEqual(insideTransactions, []);
    });
  });
}
