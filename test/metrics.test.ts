import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { freePort } from '../bench/processes.ts';
import { startWorker } from '../src/start-worker.ts';
import {
  BACKENDS,
  createTestContext,
  createWebhookTestContext,
  type TestContext,
} from './helpers/context.ts';
import { deliveryRows } from './helpers/delivery-rows.ts';
import { createTenant, tripBody } from './helpers/fixtures.ts';
import { HttpsReceiver } from './helpers/https-receiver.ts';
import { startTourops } from './helpers/processes.ts';
import { type MetricFamily, parseExposition } from './helpers/prometheus.ts';
import { until } from './helpers/until.ts';
import { WorkerMonitor } from './helpers/worker-monitor.ts';

type Families = MetricFamily[];

const family = (families: Families, name: string) => {
  // The reference parser names a counter's family without its `_total`.
  const found = families.find((f) => f.name === name || `${f.name}_total` === name);
  assert.ok(found, `${name} is exposed`);
  return found;
};
/** A counter's or gauge's value, or a histogram's count, for the first sample with `labels`. */
const value = (families: Families, name: string, labels: Record<string, string> = {}) => {
  const f = family(families, name);
  const wanted =
    f.type === 'histogram' ? `${f.name}_count` : f.type === 'counter' ? `${f.name}_total` : f.name;
  const sample = f.samples.find(
    (s) => s.name === wanted && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  return sample?.value ?? Number.NaN;
};

for (const backend of BACKENDS) {
  describe(`Prometheus metrics (${backend})`, () => {
    let ctx: TestContext;
    let receiver: HttpsReceiver;
    let worker: ReturnType<typeof startWorker>;

    before(async () => {
      ctx = await createWebhookTestContext(backend, { WEBHOOK_RETRY_SCHEDULE: '20ms' });
      receiver = await HttpsReceiver.start({
        responder: (r) => ({ status: r.path === '/down' ? 500 : 204 }),
      });
      worker = startWorker(ctx.runtime, { pollIntervalMs: 50 });
    });
    after(async () => {
      await worker.stop();
      await receiver.close();
      await ctx.close();
    });

    const scrape = async () => {
      const response = await ctx.app.inject({ url: '/metrics' });
      assert.equal(response.statusCode, 200, response.body);
      assert.match(String(response.headers['content-type']), /^text\/plain; version=0\.0\.4/);
      return parseExposition(response.body);
    };

    it('counts requests by route and status class, replays, attempts by outcome, and the queue', async () => {
      const monitor = new WorkerMonitor(worker.worker);
      const tenant = await createTenant(ctx);
      await ctx.api('GET', '/api/v1/trips', { token: tenant.token });
      await ctx.api('GET', '/api/v1/trips/trp_01JDZZZZZZZZZZZZZZZZZZZZZZ', { token: tenant.token });
      const keyed = {
        token: tenant.token,
        body: tripBody(tenant),
        headers: { 'idempotency-key': 'm-1' },
      };
      await ctx.api('POST', '/api/v1/trips', keyed);
      await ctx.api('POST', '/api/v1/trips', keyed);
      const up = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: receiver.url('/up'), events: ['client.created'] },
      });
      const down = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: receiver.url('/down'), events: ['client.created'] },
      });
      await ctx.api('POST', '/api/v1/clients', {
        token: tenant.token,
        body: { kind: 'individual', displayName: 'Measured' },
      });
      await monitor.recorded(up.json().data.id, 'success');
      await monitor.recorded(down.json().data.id, 'dead_letter');

      const families = await scrape();
      const requests = family(families, 'tourops_http_request_duration_seconds');
      assert.equal(requests.type, 'histogram');
      assert.ok(
        value(families, 'tourops_http_request_duration_seconds', {
          route: '/api/v1/trips',
          method: 'GET',
          status_class: '2xx',
        }) >= 1,
      );
      assert.ok(
        value(families, 'tourops_http_request_duration_seconds', {
          route: '/api/v1/trips/:id',
          status_class: '4xx',
        }) >= 1,
      );
      assert.equal(value(families, 'tourops_idempotent_replays_total'), 1);
      assert.ok(value(families, 'tourops_webhook_attempts_total', { outcome: 'success' }) >= 1);
      assert.ok(value(families, 'tourops_webhook_attempts_total', { outcome: 'retry' }) >= 1);
      assert.ok(value(families, 'tourops_webhook_attempts_total', { outcome: 'dead_letter' }) >= 1);
      assert.ok(value(families, 'tourops_webhook_attempt_duration_seconds') >= 3);
      assert.ok(value(families, 'tourops_webhook_claim_batch_size') >= 1);
      assert.equal(value(families, 'tourops_webhook_attempts_in_flight'), 0);
      for (const gauge of [
        'tourops_webhook_deliveries_pending',
        'tourops_webhook_oldest_due_age_seconds',
        'tourops_webhook_subscriptions_paused',
      ]) {
        assert.equal(family(families, gauge).type, 'gauge');
        assert.ok(value(families, gauge) >= 0, gauge);
      }
      assert.ok(value(families, 'tourops_process_cpu_seconds_total') > 0);
    });

    it('counts rate-limit rejections by scope', async () => {
      const limited = await createTestContext(backend, {
        env: { RATE_LIMIT_BURST_PER_SEC: '1', RATE_LIMIT_PER_MIN: '1000' },
      });
      try {
        const tenant = await createTenant(limited);
        const statuses = [];
        for (let i = 0; i < 4; i++) {
          statuses.push(
            (await limited.api('GET', '/api/v1/me', { token: tenant.token })).statusCode,
          );
        }
        assert.ok(statuses.includes(429), `${statuses}`);
        const response = await limited.app.inject({ url: '/metrics' });
        const families = parseExposition(response.body);
        assert.equal(
          value(families, 'tourops_rate_limit_rejections_total', { scope: 'token' }),
          statuses.filter((s) => s === 429).length,
        );
      } finally {
        await limited.close();
      }
    });
  });
}

describe('who may read /metrics', () => {
  it('with METRICS_TOKEN: its bearer only; without: loopback binds only', async () => {
    const guarded = await createTestContext('sqlite', {
      env: { METRICS_TOKEN: 'metrics-secret-0123456789' },
    });
    try {
      const get = (authorization?: string) =>
        guarded.app.inject({ url: '/metrics', headers: authorization ? { authorization } : {} });
      assert.equal((await get()).statusCode, 401);
      assert.equal((await get('Bearer wrong')).statusCode, 401);
      assert.equal((await get('Bearer metrics-secret-0123456789')).statusCode, 200);
    } finally {
      await guarded.close();
    }
    const exposed = await createTestContext('sqlite', { env: { HOST: '0.0.0.0' } });
    try {
      assert.equal((await exposed.app.inject({ url: '/metrics' })).statusCode, 404);
    } finally {
      await exposed.close();
    }
  });

  it('a separate tourops worker serves its own on WORKER_METRICS_PORT', async () => {
    const ctx = await createTestContext('sqlite');
    const port = await freePort();
    const worker = await startTourops(
      ['worker'],
      { ...ctx.env, LOG_LEVEL: 'warn', WORKER_METRICS_PORT: String(port) },
      'Webhook delivery worker running',
    );
    try {
      const response = await until(async () =>
        fetch(`http://127.0.0.1:${port}/metrics`).catch(() => undefined),
      );
      assert.equal(response.status, 200);
      const families = parseExposition(await response.text());
      assert.equal(family(families, 'tourops_webhook_attempts_in_flight').type, 'gauge');
      assert.equal((await fetch(`http://127.0.0.1:${port}/other`)).status, 404);
    } finally {
      assert.equal(await worker.stop(), 0);
      await ctx.close();
    }
  });
});

for (const backend of BACKENDS) {
  describe(`stuck work shows (${backend})`, () => {
    it('counts deliveries in flight whose worker died in /metrics and in /readyz', async () => {
      // No worker: nothing takes the stuck row over while the test looks at it.
      const ctx = await createWebhookTestContext(backend);
      try {
        const tenant = await createTenant(ctx);
        const hook = await ctx.api('POST', '/api/v1/webhooks', {
          token: tenant.token,
          body: { url: 'https://127.0.0.1:9/stuck', events: ['client.created'] },
        });
        assert.equal(hook.statusCode, 201, hook.body);
        for (const displayName of ['Stuck', 'Slow']) {
          await ctx.api('POST', '/api/v1/clients', {
            token: tenant.token,
            body: { kind: 'individual', displayName },
          });
        }
        // Claimed an hour ago, one by a worker whose heartbeat stopped a minute ago (it died
        // mid-attempt), one by a worker that beats now (a slow attempt: not stuck).
        const { db } = ctx.runtime.database;
        const now = Date.now();
        const at = (ago: number) => new Date(now - ago).toISOString();
        await ctx.runtime.queue.joinWorker('wkr_dead', at(60_000));
        await ctx.runtime.queue.joinWorker('wkr_live', at(0));
        const rows = await deliveryRows(db).select('id').orderBy('id').execute();
        for (const [i, { id }] of rows.entries()) {
          await db
            .updateTable('webhookDeliveries')
            .set({
              status: 'in_flight',
              claimedAt: at(3_600_000),
              claimedBy: i === 0 ? 'wkr_dead' : 'wkr_live',
            })
            .where('id', '=', id)
            .execute();
        }
        const families = parseExposition((await ctx.app.inject({ url: '/metrics' })).body);
        assert.equal(family(families, 'tourops_webhook_deliveries_stuck').type, 'gauge');
        assert.equal(value(families, 'tourops_webhook_deliveries_stuck'), 1);
        const ready = await ctx.app.inject({ url: '/readyz' });
        assert.equal(ready.statusCode, 200);
        assert.equal(ready.json().deliveries.stuck, 1);
      } finally {
        await ctx.close();
      }
    });
  });
}
