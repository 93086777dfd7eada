import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { startWorker } from '../src/start-worker.ts';
import { BACKENDS, createWebhookTestContext, type TestContext } from './helpers/context.ts';
import { createClient, createTenant, type TenantFixture } from './helpers/fixtures.ts';
import { HttpsReceiver, type ReceivedRequest } from './helpers/https-receiver.ts';
import { until } from './helpers/until.ts';

type Row = Record<string, unknown>;

/** Secrets no read, log line or attempt log may ever show. */
const API_KEY = 'k-live-9f2c61d04b7e';
const PASSWORD = 'pa55-0a7d3e19c4';
const OTHER_KEY = 'k-live-77e0b3aa51d2';
const BASIC = `Basic ${Buffer.from(`ops:${PASSWORD}`).toString('base64')}`;

/** The gateway: 401 unless the request carries what the path demands. */
function gateway(request: ReceivedRequest) {
  const header = (name: string) => request.headers[name];
  if (request.path.startsWith('/keyed')) {
    return { status: header('x-api-key') === API_KEY ? 204 : 401, body: 'no key' };
  }
  if (request.path.startsWith('/basic')) {
    return { status: header('authorization') === BASIC ? 204 : 401, body: 'no auth' };
  }
  return { status: 204 };
}

for (const backend of BACKENDS) {
  describe(`receiver authentication: headers and Basic (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let receiver: HttpsReceiver;
    let worker: ReturnType<typeof startWorker>;
    const logLines: string[] = [];

    before(async () => {
      const stream = new Writable({
        write(chunk, _encoding, done) {
          logLines.push(String(chunk));
          done();
        },
      });
      ctx = await createWebhookTestContext(
        backend,
        { WEBHOOK_RETRY_SCHEDULE: '5s' },
        { logger: pino({ level: 'debug' }, stream) },
      );
      tenant = await createTenant(ctx);
      receiver = await HttpsReceiver.start({ responder: gateway });
      worker = startWorker(ctx.runtime, { pollIntervalMs: 20 });
    });
    after(async () => {
      await worker.stop();
      await receiver.close();
      await ctx.close();
    });

    const create = (body: Row) =>
      ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { events: ['client.created'], ...body },
      });
    const patch = (id: string, body: Row) =>
      ctx.api('PATCH', `/api/v1/webhooks/${id}`, { token: tenant.token, body });
    /** The newest delivery of the subscription, once an attempt's outcome is recorded. */
    const firstAttempt = (id: string) =>
      until(
        async () => {
          const deliveries = await ctx.api('GET', `/api/v1/webhooks/${id}/deliveries`, {
            token: tenant.token,
          });
          const [latest] = deliveries.json().data as Row[];
          // Claimed counts the attempt; its answer is recorded after.
          const answered =
            latest && (latest.lastResponseStatus !== null || latest.lastError !== null);
          return answered ? latest : undefined;
        },
        10_000,
        `an attempt to ${id}`,
      );

    it('sends the headers and the Basic credentials a gateway demands; without them, 401', async () => {
      const keyed = await create({
        url: receiver.url('/keyed'),
        headers: { 'X-Api-Key': API_KEY },
      });
      assert.equal(keyed.statusCode, 201, keyed.body);
      assert.deepEqual(keyed.json().data.headers, { 'X-Api-Key': '***' });
      const basic = await create({
        url: receiver.url('/basic'),
        auth: { type: 'basic', username: 'ops', password: PASSWORD },
      });
      assert.equal(basic.statusCode, 201, basic.body);
      assert.deepEqual(basic.json().data.auth, { type: 'basic', username: 'ops', password: '***' });
      const bare = await create({ url: receiver.url('/keyed-bare') });

      await createClient(ctx, tenant, { displayName: 'Gateway test' });
      assert.equal((await firstAttempt(keyed.json().data.id)).lastResponseStatus, 204);
      assert.equal((await firstAttempt(basic.json().data.id)).lastResponseStatus, 204);
      assert.equal((await firstAttempt(bare.json().data.id)).lastResponseStatus, 401);
      const sent = receiver.requests.find((r) => r.path === '/keyed');
      assert.equal(sent?.headers['x-api-key'], API_KEY);
      // Ours are all there beside them.
      assert.match(String(sent?.headers['service-signature']), /^t=\d+,v1=/);
    });

    it('masks every secret in reads; a PATCH with *** keeps it, on the same origin only', async () => {
      const created = await create({
        url: receiver.url('/keyed/2'),
        headers: { 'X-Api-Key': API_KEY },
      });
      const id = created.json().data.id as string;
      const kept = await patch(id, { headers: { 'X-Api-Key': '***', 'X-Team': 'blue' } });
      assert.equal(kept.statusCode, 200, kept.body);
      assert.deepEqual(kept.json().data.headers, { 'X-Api-Key': '***', 'X-Team': '***' });
      await createClient(ctx, tenant, { displayName: 'Kept key' });
      assert.equal((await firstAttempt(id)).lastResponseStatus, 204);
      const sent = receiver.requests.filter((r) => r.path === '/keyed/2').at(-1);
      assert.equal(sent?.headers['x-api-key'], API_KEY);
      assert.equal(sent?.headers['x-team'], 'blue');

      // Another origin: a stored secret never follows the URL, masked or left out.
      const elsewhere = 'https://localhost:9/keyed/2';
      const moved = await patch(id, { url: elsewhere });
      assert.equal(moved.statusCode, 422);
      assert.deepEqual(Object.keys(moved.json().errors), ['headers']);
      const masked = await patch(id, { url: elsewhere, headers: { 'X-Api-Key': '***' } });
      assert.deepEqual(Object.keys(masked.json().errors), ['headers.X-Api-Key']);
      const resent = await patch(id, { url: elsewhere, headers: { 'X-Api-Key': OTHER_KEY } });
      assert.equal(resent.statusCode, 200, resent.body);
      const cleared = await patch(id, { headers: null });
      assert.deepEqual(cleared.json().data.headers, {});

      const basic = await create({
        url: receiver.url('/basic/2'),
        auth: { type: 'basic', username: 'ops', password: PASSWORD },
      });
      const renamed = await patch(basic.json().data.id, {
        auth: { type: 'basic', username: 'ops2', password: '***' },
      });
      assert.equal(renamed.statusCode, 200, renamed.body);
      assert.deepEqual(renamed.json().data.auth, {
        type: 'basic',
        username: 'ops2',
        password: '***',
      });
    });

    it('refuses every header it may not set, and anything on a broker, naming the member', async () => {
      const url = receiver.url('/refused');
      const refusedNames = [
        'Service-Signature',
        'service-event-id',
        'Webhook-Signature',
        'Connection',
        'Host',
        'Content-Type',
        'Content-Length',
        'Transfer-Encoding',
        'User-Agent',
        'traceparent',
        'Proxy-Authorization',
        'bad name',
        'x:y',
      ];
      for (const name of refusedNames) {
        const answer = await create({ url, headers: { [name]: 'v' } });
        assert.equal(answer.statusCode, 422, name);
        assert.deepEqual(Object.keys(answer.json().errors), [`headers.${name}`], name);
      }
      const withAuth = await create({
        url,
        headers: { Authorization: 'Bearer x' },
        auth: { type: 'basic', username: 'ops', password: PASSWORD },
      });
      assert.deepEqual(Object.keys(withAuth.json().errors), ['headers.Authorization']);
      for (const value of ['a\r\nX-Injected: 1', '', ' padded', 'x'.repeat(4097)]) {
        const answer = await create({ url, headers: { 'X-Api-Key': value } });
        assert.equal(answer.statusCode, 422, JSON.stringify(value));
        assert.deepEqual(Object.keys(answer.json().errors), [
          value.length > 4096 ? 'headers.X-Api-Key' : 'headers.X-Api-Key',
        ]);
      }
      const eleven = Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`x-h${i}`, 'v']));
      assert.deepEqual(Object.keys((await create({ url, headers: eleven })).json().errors), [
        'headers',
      ]);
      const twice = await create({ url, headers: { 'X-Key': 'a', 'x-key': 'b' } });
      assert.deepEqual(Object.keys(twice.json().errors), ['headers.x-key']);
      const nothingStored = await create({ url, headers: { 'X-Api-Key': '***' } });
      assert.deepEqual(Object.keys(nothingStored.json().errors), ['headers.X-Api-Key']);
      const colon = await create({
        url,
        auth: { type: 'basic', username: 'a:b', password: PASSWORD },
      });
      assert.deepEqual(Object.keys(colon.json().errors), ['auth.username']);
      const broker = 'amqp://guest:guest@127.0.0.1:5672/?exchange=tourops.auth&routingKey=x';
      const onBroker = await create({ url: broker, headers: { 'X-Api-Key': API_KEY } });
      assert.deepEqual(Object.keys(onBroker.json().errors), ['headers']);
      const authOnBroker = await create({
        url: broker,
        auth: { type: 'basic', username: 'ops', password: PASSWORD },
      });
      assert.deepEqual(Object.keys(authOnBroker.json().errors), ['auth']);
      const list = await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token });
      assert.equal(
        (list.json().data as Row[]).filter((s) => String(s.url).endsWith('/refused')).length,
        0,
        'no refused create made a subscription',
      );
    });

    it('never shows a secret: not in reads, attempt logs, log lines, nor the stored row', async () => {
      const seen: string[] = [];
      const list = await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token });
      seen.push(list.body);
      for (const s of list.json().data as Row[]) {
        const deliveries = await ctx.api('GET', `/api/v1/webhooks/${s.id}/deliveries`, {
          token: tenant.token,
        });
        seen.push(deliveries.body);
        for (const d of deliveries.json().data as Row[]) {
          const attempts = await ctx.api(
            'GET',
            `/api/v1/webhooks/${s.id}/deliveries/${d.id}/attempts`,
            { token: tenant.token },
          );
          seen.push(attempts.body);
        }
      }
      const rows = await ctx.runtime.database.db
        .selectFrom('webhookSubscriptions')
        .select(['receiverAuth', 'receiverSecrets'])
        .execute();
      seen.push(JSON.stringify(rows));
      seen.push(...logLines);
      assert.ok(logLines.length > 0, 'the worker and the API logged');
      const basicEncoded = BASIC.slice('Basic '.length);
      for (const secret of [API_KEY, PASSWORD, OTHER_KEY, basicEncoded]) {
        const found = seen.find((text) => text.includes(secret));
        assert.equal(found, undefined, `${secret} shown: ${found?.slice(0, 200)}`);
      }
    });
  });
}
