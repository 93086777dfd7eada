import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:net';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { SecretBox } from '../src/lib/secret-box.ts';
import { startWorker } from '../src/start-worker.ts';
import { BACKENDS, createWebhookTestContext, type TestContext } from './helpers/context.ts';
import { createClient, createTenant, type TenantFixture } from './helpers/fixtures.ts';
import { HttpsReceiver, type Responder } from './helpers/https-receiver.ts';
import { until } from './helpers/until.ts';

// The attempt log with real endpoints failing in every way the contract names.

/** A TCP server on loopback doing `onConnection` to every connection. */
async function tcpServer(onConnection: (socket: import('node:net').Socket) => void) {
  const server = createServer(onConnection);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}
const portOf = (server: Server) => (server.address() as import('node:net').AddressInfo).port;

for (const backend of BACKENDS) {
  describe(`the attempt log (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let receiver: HttpsReceiver;
    let worker: ReturnType<typeof startWorker>;
    let resetting: Server;
    let notTls: Server;
    let closedPort: number;

    before(async () => {
      ctx = await createWebhookTestContext(backend, {
        WEBHOOK_TIMEOUT_MS: '700',
        WEBHOOK_RETRY_SCHEDULE: '1h',
      });
      tenant = await createTenant(ctx, { tier: 'pro' });
      await ctx.admin('PATCH', `/admin/v1/tenants/${tenant.id}`, { webhookEndpointCap: 20 });
      receiver = await HttpsReceiver.start({
        responder: (r): ReturnType<Responder> => {
          if (r.path === '/slow') return 'hang';
          if (r.path === '/busy') {
            return { status: 429, headers: { 'retry-after': '1' }, body: 'slow down, please' };
          }
          if (r.path === '/huge') return { status: 200, body: 'y'.repeat(100 * 1024) };
          if (r.path === '/odd') return { status: 200, body: 'a\u0000b é 🎉 \u0001' };
          if (r.path === '/moved') {
            return { status: 302, headers: { location: receiver.url('/elsewhere') } };
          }
          return { status: 200, body: '{"ok":true}' };
        },
      });
      resetting = await tcpServer((socket) => socket.destroy());
      notTls = await tcpServer((socket) => socket.end('HTTP/1.1 200 OK\r\n\r\n'));
      const closed = await tcpServer((socket) => socket.destroy());
      closedPort = portOf(closed);
      await new Promise((resolve) => closed.close(resolve));
      worker = startWorker(ctx.runtime, { pollIntervalMs: 50 });
    });
    after(async () => {
      await worker.stop();
      await receiver.close();
      resetting.close();
      notTls.close();
      await ctx.close();
    });

    /** Subscribes `url`, fires a test event at it, and returns its first recorded attempt. */
    async function firstAttempt(url: string) {
      const created = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url, events: ['client.created'] },
      });
      assert.equal(created.statusCode, 201, created.body);
      const id = created.json().data.id;
      await ctx.api('POST', '/api/v1/webhooks/test', {
        token: tenant.token,
        body: { subscriptionId: id },
      });
      const [delivery] = (
        await ctx.api('GET', `/api/v1/webhooks/${id}/deliveries`, { token: tenant.token })
      ).json().data;
      const attempts = await until(async () => {
        const page = await ctx.api(
          'GET',
          `/api/v1/webhooks/${id}/deliveries/${delivery.id}/attempts`,
          { token: tenant.token },
        );
        assert.equal(page.statusCode, 200, page.body);
        const data = page.json().data;
        return data.length > 0 ? data : undefined;
      }, `an attempt to ${url}`);
      const after = (
        await ctx.api('GET', `/api/v1/webhooks/${id}/deliveries`, { token: tenant.token })
      ).json().data[0];
      return { attempt: attempts.at(-1), delivery: after };
    }

    it('records a refused connection, a reset, a time-out and a TLS failure by class', async () => {
      const cases = [
        [`https://127.0.0.1:${closedPort}/hook`, 'connection_refused'],
        [`https://127.0.0.1:${portOf(resetting)}/hook`, 'connection_reset'],
        [receiver.url('/slow'), 'timeout'],
        [`https://127.0.0.1:${portOf(notTls)}/hook`, 'tls'],
      ] as const;
      for (const [url, errorClass] of cases) {
        const firedAt = Date.now();
        const { attempt, delivery } = await firstAttempt(url);
        const readAt = Date.now();
        assert.equal(attempt.errorClass, errorClass, url);
        assert.equal(attempt.status, null);
        assert.equal(attempt.attempt, 1);
        // No answer arrived; a TLS failure says in words which side refused, and why.
        if (errorClass === 'tls') {
          assert.equal(
            attempt.responseBody,
            'TLS: the receiver does not speak TLS on this port (wrong version number): is it plain HTTP?',
          );
        } else {
          assert.equal(attempt.responseBody, '');
        }
        // The attempt's span lies within the test's own: fired before it began, read after it ended.
        const startedMs = Date.parse(attempt.startedAt);
        assert.ok(attempt.durationMs >= 0 && startedMs >= firedAt, attempt.startedAt);
        assert.ok(startedMs + attempt.durationMs <= readAt + 1, `${attempt.durationMs} ms`);
        assert.equal(delivery.lastError, errorClass);
        assert.equal(delivery.status, 'pending', 'retried later');
        if (errorClass === 'timeout') assert.ok(attempt.durationMs >= 650, `${attempt.durationMs}`);
      }
    });

    it('records the status and the start of the answer, and what was wrong with it', async () => {
      const busy = await firstAttempt(receiver.url('/busy'));
      assert.equal(busy.attempt.status, 429);
      assert.equal(busy.attempt.errorClass, null);
      assert.equal(busy.attempt.responseBody, 'slow down, please');
      assert.equal(busy.delivery.lastError, null);
      assert.equal(busy.delivery.lastResponseStatus, 429);

      const moved = await firstAttempt(receiver.url('/moved'));
      assert.equal(moved.attempt.status, 302);
      assert.equal(moved.attempt.errorClass, 'redirect');
      assert.equal(moved.delivery.lastError, 'redirect');

      const huge = await firstAttempt(receiver.url('/huge'));
      assert.equal(huge.attempt.status, 200);
      assert.equal(huge.attempt.errorClass, 'body_too_large');
      assert.equal(huge.attempt.responseBody, 'y'.repeat(1024));
      assert.equal(huge.delivery.status, 'success', 'a 2xx counts by its status');
      assert.equal(huge.delivery.lastError, null);

      // PostgreSQL's text holds no NUL: kept as U+FFFD, the rest as sent, and recorded at all.
      const odd = await firstAttempt(receiver.url('/odd'));
      assert.equal(odd.attempt.responseBody, 'a\uFFFDb é 🎉 \u0001');
      assert.equal(odd.delivery.status, 'success');

      const fine = await firstAttempt(receiver.url('/fine'));
      assert.deepEqual(
        {
          status: fine.attempt.status,
          errorClass: fine.attempt.errorClass,
          body: fine.attempt.responseBody,
        },
        { status: 200, errorClass: null, body: '{"ok":true}' },
      );
    });

    it('answers 404 for a delivery of another subscription or tenant', async () => {
      const other = await createTenant(ctx, { tier: 'pro' });
      const created = await ctx.api('POST', '/api/v1/webhooks', {
        token: other.token,
        body: { url: receiver.url('/other'), events: ['client.created'] },
      });
      const id = created.json().data.id;
      const missing = await ctx.api(
        'GET',
        `/api/v1/webhooks/${id}/deliveries/dlv_01JDZZZZZZZZZZZZZZZZZZZZZZ/attempts`,
        { token: other.token },
      );
      assert.equal(missing.statusCode, 404);
      const foreign = await ctx.api(
        'GET',
        `/api/v1/webhooks/${id}/deliveries/dlv_01JDZZZZZZZZZZZZZZZZZZZZZZ/attempts`,
        { token: tenant.token },
      );
      assert.equal(foreign.statusCode, 404);
    });
  });
}

for (const backend of BACKENDS) {
  describe(`a failure on our side (${backend})`, () => {
    /**
     * A worker beside an API logging into `lines`, and a tenant's subscription to
     * client.created at a receiver; `settled` waits for its first delivery to reach `status`.
     */
    async function subscribed(
      level: string,
      env: Record<string, string> = {},
      clock?: { now(): Date },
    ) {
      const lines: Array<Record<string, unknown>> = [];
      const logger = pino({ level }, { write: (line: string) => lines.push(JSON.parse(line)) });
      const ctx = await createWebhookTestContext(backend, env, { logger, clock });
      const receiver = await HttpsReceiver.start();
      const worker = startWorker(ctx.runtime, { pollIntervalMs: 50 });
      const close = async () => {
        await worker.stop();
        await receiver.close();
        await ctx.close();
      };
      try {
        const tenant = await createTenant(ctx);
        const created = await ctx.api('POST', '/api/v1/webhooks', {
          token: tenant.token,
          body: { url: receiver.url('/hook'), events: ['client.created'] },
        });
        const id = created.json().data.id as string;
        const get = (url: string) => ctx.api('GET', url, { token: tenant.token });
        const settled = (status: string) =>
          until(async () => {
            const [row] = (await get(`/api/v1/webhooks/${id}/deliveries`)).json().data;
            return row?.status === status ? row : undefined;
          });
        const attemptsOf = async (deliveryId: string) =>
          (await get(`/api/v1/webhooks/${id}/deliveries/${deliveryId}/attempts`)).json().data;
        return { lines, ctx, receiver, tenant, id, get, settled, attemptsOf, close };
      } catch (error) {
        await close();
        throw error;
      }
    }

    it('records it as an internal attempt that follows the cascade to a dead letter, logged at warn', async () => {
      const setup = await subscribed('info', { WEBHOOK_RETRY_SCHEDULE: '100ms,100ms' });
      const { lines, ctx, receiver, tenant, id } = setup;
      try {
        // A key sealed under another SECRET_KEY (a restored row, a rotated variable): it cannot
        // be opened, so nothing can be signed.
        await ctx.runtime.repositories.webhooks.updateSubscription(tenant.id, id, {
          signingKey: new SecretBox('another-secret-key-0123456789abcdef').encrypt('whsec_x', id),
        });
        await createClient(ctx, tenant);
        const delivery = await setup.settled('dead_letter');
        assert.equal(delivery.lastError, 'internal');
        assert.equal(delivery.attempts, 3);
        const attempts = await setup.attemptsOf(delivery.id);
        assert.deepEqual(
          attempts.map((a: { errorClass: string; status: number | null }) => [
            a.errorClass,
            a.status,
          ]),
          [
            ['internal', null],
            ['internal', null],
            ['internal', null],
          ],
        );
        assert.equal(receiver.requests.length, 0, 'nothing unsigned was sent');
        // The endpoint did nothing wrong: its counters are untouched.
        const subscription = (await setup.get('/api/v1/webhooks')).json().data[0];
        assert.equal(subscription.consecutiveFailures, 0);
        const deadLettered = lines.filter((line) => line.msg === 'webhook dead-lettered');
        assert.equal(deadLettered.length, 1);
        assert.equal(deadLettered[0].level, 40);
        assert.equal(deadLettered[0].error, 'internal');
      } finally {
        await setup.close();
      }
    });

    it('gives the row back when its start throws, and sends it once after', async () => {
      // A fault of ours inside a delivery's start, before the recorder has its row: the clock
      // fails once when read from the worker's deliver().
      let faults = 0;
      const clock = {
        now: () => {
          if (faults > 0 && new Error().stack?.includes('DeliveryWorker.deliver')) {
            faults -= 1;
            throw new Error('a fault inside deliver()');
          }
          return new Date();
        },
      };
      const setup = await subscribed('error', {}, clock);
      const { lines, ctx, receiver, tenant } = setup;
      try {
        faults = 1;
        await createClient(ctx, tenant);
        const delivery = await setup.settled('success');
        assert.equal(faults, 0, 'the fault happened');
        const failed = lines.filter((line) => line.msg === 'delivery failed on our side');
        assert.equal(failed.length, 1);
        assert.equal(failed[0].givenBack, true);
        assert.equal(failed[0].deliveryId, delivery.id);
        // Given back, not attempted: one attempt, the one that reached the receiver.
        assert.equal(delivery.attempts, 1);
        assert.equal(receiver.requests.length, 1);
        assert.equal((await setup.attemptsOf(delivery.id)).length, 1);
      } finally {
        await setup.close();
      }
    });
  });
}
