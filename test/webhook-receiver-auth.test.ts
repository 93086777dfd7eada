import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { TLSSocket } from 'node:tls';
import fc from 'fast-check';
import {
  NO_RECEIVER_SECRETS,
  nextReceiverSecrets,
  receiverHeaders,
} from '../src/domain/receiver-auth.ts';
import { SecretBox } from '../src/lib/secret-box.ts';
import { startWorker } from '../src/start-worker.ts';
import { BACKENDS, createWebhookTestContext, type TestContext } from './helpers/context.ts';
import { createClient, createTenant, type TenantFixture } from './helpers/fixtures.ts';
import { holdsUnkept } from './helpers/fuzz.ts';
import {
  type ClientPki,
  HttpsReceiver,
  type ReceivedRequest,
  testCa,
  testClientPki,
} from './helpers/https-receiver.ts';
import { captureLogs } from './helpers/log-capture.ts';
import { PortalClient, pathOf } from './helpers/portal-client.ts';
import { until } from './helpers/until.ts';

type Row = Record<string, unknown>;

/** Secrets no read, log line or attempt log may ever show. */
const API_KEY = 'k-live-9f2c61d04b7e';
const PASSWORD = 'pa55-0a7d3e19c4';
const OTHER_KEY = 'k-live-77e0b3aa51d2';
const BASIC = `Basic ${Buffer.from(`ops:${PASSWORD}`).toString('base64')}`;

/**
 * Everything a tenant and an operator may read about the tenant's subscriptions: every read, its
 * deliveries and their attempt logs, the stored row, and `logLines` (the captured log).
 */
async function shownTexts(
  ctx: TestContext,
  tenant: TenantFixture,
  logLines: unknown[],
): Promise<string[]> {
  const texts = [JSON.stringify(logLines)];
  const list = await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token });
  texts.push(list.body);
  for (const s of list.json().data as Row[]) {
    const deliveries = await ctx.api('GET', `/api/v1/webhooks/${s.id}/deliveries?limit=100`, {
      token: tenant.token,
    });
    texts.push(deliveries.body);
    for (const d of deliveries.json().data as Row[]) {
      const attempts = await ctx.api(
        'GET',
        `/api/v1/webhooks/${s.id}/deliveries/${d.id}/attempts`,
        { token: tenant.token },
      );
      texts.push(attempts.body);
    }
  }
  const rows = await ctx.runtime.database.db
    .selectFrom('webhookSubscriptions')
    .select(['receiverAuth', 'receiverSecrets'])
    .execute();
  texts.push(JSON.stringify(rows));
  return texts;
}

/** No secret appears in any of the texts. */
function noneShown(texts: string[], secrets: string[]): void {
  for (const secret of secrets) {
    const found = texts.find((text) => text.includes(secret));
    assert.equal(found, undefined, `${secret} shown: ${found?.slice(0, 200)}`);
  }
}

/** The gateway: 401 unless the request carries what the path demands. */
function gateway(request: ReceivedRequest) {
  const header = (name: string) => request.headers[name];
  if (request.path.startsWith('/keyed')) {
    return { status: header('x-api-key') === API_KEY ? 204 : 401, body: 'no key' };
  }
  if (request.path.startsWith('/basic')) {
    return { status: header('authorization') === BASIC ? 204 : 401, body: 'no auth' };
  }
  if (request.path.startsWith('/echo')) return echoed(request);
  return { status: 204 };
}

/** A receiver that refuses by echoing what it was sent: headers, decoded Basic pair, as JSON. */
function echoed(request: ReceivedRequest) {
  const authorization = String(request.headers.authorization ?? '');
  const pair = Buffer.from(authorization.replace(/^Basic /, ''), 'base64').toString('utf8');
  return { status: 400, body: JSON.stringify({ headers: request.headers, pair }) };
}

for (const backend of BACKENDS) {
  describe(`receiver authentication: headers and Basic (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let receiver: HttpsReceiver;
    let worker: ReturnType<typeof startWorker>;
    const logs = captureLogs('debug');

    before(async () => {
      ctx = await createWebhookTestContext(
        backend,
        { WEBHOOK_RETRY_SCHEDULE: '5s' },
        { logger: logs.logger },
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
      until(async () => {
        const deliveries = await ctx.api('GET', `/api/v1/webhooks/${id}/deliveries`, {
          token: tenant.token,
        });
        const [latest] = deliveries.json().data as Row[];
        // Claimed counts the attempt; its answer is recorded after.
        const answered =
          latest && (latest.lastResponseStatus !== null || latest.lastError !== null);
        return answered ? latest : undefined;
      }, `an attempt to ${id}`);

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
      // A union is judged by the branch its `type` names, or by that member alone.
      for (const [auth, errors] of [
        [{ type: 'basic', username: 'ops', password: '' }, { 'auth.password': 1 }],
        [
          { type: 'oauth2_client_credentials', tokenUrl: 'https://127.0.0.1:9/t', clientId: 'c' },
          { 'auth.clientSecret': 1 },
        ],
        [{ type: 'basic', username: 'ops', password: PASSWORD, scope: 's' }, { 'auth.scope': 1 }],
        [{ type: 'digest', username: 'ops' }, { 'auth.type': 1 }],
        [{ username: 'ops', password: PASSWORD }, { 'auth.type': 1 }],
      ] as const) {
        const refused = await create({ url, auth });
        assert.equal(refused.statusCode, 422, JSON.stringify(auth));
        const found = refused.json().errors as Record<string, string[]>;
        assert.deepEqual(Object.keys(found), Object.keys(errors), JSON.stringify(found));
        assert.equal(found[Object.keys(errors)[0]].length, 1, JSON.stringify(found));
      }
      const unknown = await create({ url, auth: { type: 'digest' } });
      assert.deepEqual(unknown.json().errors, {
        'auth.type': ['must be one of: basic, oauth2_client_credentials'],
      });
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

    it('stores and sends exactly what it accepted: random headers and Basic credentials', async () => {
      const box = new SecretBox(ctx.runtime.secretKey);
      const text = fc.oneof(
        fc.string({ unit: 'binary', maxLength: 12 }),
        fc.string({ maxLength: 12 }),
        fc.constantFrom('ops', 'é', '😀', 'a\ud800', '\udc00', 'a\u0000b', '***', ' x', 'a:b', ''),
      );
      let stored = 0;
      let refused = 0;
      await fc.assert(
        fc.asyncProperty(text, text, text, async (username, password, value) => {
          const response = await ctx.app.inject({
            method: 'POST',
            url: '/api/v1/webhooks',
            headers: {
              authorization: `Bearer ${tenant.token}`,
              'content-type': 'application/json',
            },
            // JSON.stringify writes a lone surrogate as its escape, as a client's encoder would.
            payload: JSON.stringify({
              url: receiver.url('/unused'),
              events: ['trip.unpublished'],
              headers: { 'X-Key': value },
              auth: { type: 'basic', username, password },
            }),
          });
          if (holdsUnkept([username, password, value])) {
            assert.equal(response.statusCode, 422, response.body);
          }
          if (response.statusCode !== 201) {
            refused += 1;
            assert.equal(response.statusCode, 422, response.body);
            const paths = Object.keys(response.json().errors);
            assert.ok(
              paths.every((p) => /^(auth|headers)\b/.test(p)),
              response.body,
            );
            return;
          }
          stored += 1;
          const { id } = response.json().data;
          assert.equal(response.json().data.auth.username, username);
          const [row] = await ctx.runtime.database.db
            .selectFrom('webhookSubscriptions')
            .select('receiverSecrets')
            .where('id', '=', id)
            .execute();
          const secrets = JSON.parse(box.decrypt(String(row.receiverSecrets), id));
          assert.deepEqual(secrets.headers, { 'X-Key': value });
          assert.deepEqual(secrets.auth, { type: 'basic', username, password });
          // What the attempt sends: the very text, as UTF-8, in the Basic pair.
          const sent = receiverHeaders(secrets).authorization.replace(/^Basic /, '');
          assert.equal(Buffer.from(sent, 'base64').toString('utf8'), `${username}:${password}`);
          await ctx.api('DELETE', `/api/v1/webhooks/${id}`, { token: tenant.token });
        }),
        { numRuns: 200, seed: Number(process.env.FUZZ_SEED ?? 20261128) },
      );
      assert.ok(stored > 20 && refused > 20, JSON.stringify({ stored, refused }));
    });

    it('masks every form of a secret sent when the receiver echoes its request', async () => {
      const created = await create({
        url: receiver.url('/echo'),
        headers: { 'X-Api-Key': API_KEY },
        auth: { type: 'basic', username: 'ops', password: PASSWORD },
      });
      assert.equal(created.statusCode, 201, created.body);
      await createClient(ctx, tenant, { displayName: 'Echo' });
      const delivery = await firstAttempt(created.json().data.id);
      assert.equal(delivery.lastResponseStatus, 400);
      const attempts = await ctx.api(
        'GET',
        `/api/v1/webhooks/${created.json().data.id}/deliveries/${delivery.id}/attempts`,
        { token: tenant.token },
      );
      const [attempt] = attempts.json().data as Row[];
      const shown = JSON.parse(String(attempt.responseBody));
      assert.equal(shown.headers['x-api-key'], '***');
      assert.equal(shown.headers.authorization, 'Basic ***');
      assert.equal(shown.pair, 'ops:***');
      assert.match(String(shown.headers['service-signature']), /^t=\d+,v1=/, 'the rest is kept');
    });

    it('never shows a secret: not in reads, attempt logs, log lines, nor the stored row', async () => {
      const seen = await shownTexts(ctx, tenant, logs.lines);
      assert.ok(logs.lines.length > 0, 'the worker and the API logged');
      const basicEncoded = BASIC.slice('Basic '.length);
      noneShown(seen, [API_KEY, PASSWORD, OTHER_KEY, basicEncoded]);
    });
  });
}

/**
 * A token server written here (RFC 6749 section 4.4): client Basic auth, short-lived bearer
 * tokens it remembers, and revocation; the receiver accepts only its live tokens.
 */
class TokenServer {
  readonly issued = new Map<string, number>();
  readonly revoked = new Set<string>();
  fetches = 0;
  lifetimeS = 60;
  private counter = 0;

  constructor(
    readonly clientId: string,
    readonly clientSecret: string,
  ) {}

  answer(request: ReceivedRequest) {
    const expected = `Basic ${Buffer.from(`${this.clientId}:${this.clientSecret}`).toString('base64')}`;
    const form = new URLSearchParams(request.body);
    if (request.headers.authorization !== expected) {
      return { status: 401, body: '{"error":"invalid_client"}' };
    }
    if (form.get('grant_type') !== 'client_credentials' || form.get('scope') !== 'webhooks') {
      return { status: 400, body: '{"error":"invalid_request"}' };
    }
    this.fetches += 1;
    this.counter += 1;
    const token = `at-${this.counter}-${Math.random().toString(36).slice(2, 10)}`;
    this.issued.set(token, Date.now() + this.lifetimeS * 1000);
    return {
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        access_token: token,
        token_type: 'Bearer',
        expires_in: this.lifetimeS,
      }),
    };
  }

  /** Whether a receiver should take this Authorization header. */
  accepts(authorization: unknown): boolean {
    const token = String(authorization ?? '').replace(/^Bearer /, '');
    const until = this.issued.get(token);
    return until !== undefined && until > Date.now() && !this.revoked.has(token);
  }
}

for (const backend of BACKENDS) {
  describe(`receiver authentication: OAuth2 client credentials (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let receiver: HttpsReceiver;
    let tokenHost: HttpsReceiver;
    let worker: ReturnType<typeof startWorker>;
    const server = new TokenServer('tourops-webhooks', 'cs-7e1f0a99b3d24c58');
    /** The bearer token each request to /oauth carried, in order. */
    const seen: string[] = [];
    const logs = captureLogs('debug');

    before(async () => {
      ctx = await createWebhookTestContext(
        backend,
        { WEBHOOK_RETRY_SCHEDULE: '5s' },
        { logger: logs.logger },
      );
      tenant = await createTenant(ctx);
      tokenHost = await HttpsReceiver.start({
        responder: (request) => {
          // Refuses by echoing the request, as some servers do: header, form, decoded pair.
          if (request.path.startsWith('/echo')) {
            const authorization = String(request.headers.authorization);
            const pair = Buffer.from(authorization.slice('Basic '.length), 'base64').toString();
            return {
              status: 400,
              body: JSON.stringify({
                error: 'invalid_client',
                error_description: `got authorization=${authorization} pair=${pair} form=${request.body}`,
                echo: request.headers,
              }),
            };
          }
          const answer = server.answer(request);
          // A token answer past 16 KiB: an identity token of many claims beside the access token.
          if (request.path.startsWith('/large') && answer.status === 200) {
            const padded = { ...JSON.parse(answer.body), id_token: 'e'.repeat(40_000) };
            return { ...answer, body: JSON.stringify(padded) };
          }
          return answer;
        },
      });
      receiver = await HttpsReceiver.start({
        responder: (request) => {
          seen.push(String(request.headers.authorization ?? ''));
          if (request.path.startsWith('/echo'))
            return { status: 400, body: JSON.stringify(request.headers) };
          return { status: server.accepts(request.headers.authorization) ? 204 : 401 };
        },
      });
      worker = startWorker(ctx.runtime, { pollIntervalMs: 20 });
    });
    after(async () => {
      await worker.stop();
      await receiver.close();
      await tokenHost.close();
      await ctx.close();
    });

    const oauth = (overrides: Row = {}) => ({
      type: 'oauth2_client_credentials',
      tokenUrl: tokenHost.url('/oauth/token'),
      clientId: server.clientId,
      clientSecret: server.clientSecret,
      scope: 'webhooks',
      ...overrides,
    });
    const subscribe = async (auth: Row) => {
      const created = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: receiver.url('/oauth'), events: ['client.created'], auth },
      });
      assert.equal(created.statusCode, 201, created.body);
      return created.json().data as Row;
    };
    /** Every delivery of the subscription, once each has an outcome recorded. */
    const settled = (id: string, count: number) =>
      until(async () => {
        const list = await ctx.api('GET', `/api/v1/webhooks/${id}/deliveries?limit=100`, {
          token: tenant.token,
        });
        const rows = list.json().data as Row[];
        const done = rows.filter((d) => d.lastResponseStatus !== null || d.lastError !== null);
        return done.length >= count ? rows : undefined;
      }, `${count} settled deliveries of ${id}`);
    const emit = async (count: number) => {
      for (let i = 0; i < count; i++) await createClient(ctx, tenant, { displayName: `O${i}` });
    };

    it('delivers with a valid token; one token serves many deliveries', async () => {
      const subscription = await subscribe(oauth());
      assert.deepEqual(subscription.auth, { ...oauth(), clientSecret: '***' });
      const before = server.fetches;
      await emit(12);
      const rows = await settled(subscription.id as string, 12);
      assert.deepEqual(
        rows.map((d) => d.lastResponseStatus),
        rows.map(() => 204),
      );
      assert.equal(server.fetches - before, 1, 'one token fetch served all 12');
    });

    it('replaces a token that expires mid-run, and one the receiver revoked (401), at once', async () => {
      server.lifetimeS = 1;
      const subscription = await subscribe(oauth());
      const id = subscription.id as string;
      const before = server.fetches;
      await emit(1);
      await settled(id, 1);
      const firstToken = [...server.issued.keys()].at(-1) as string;
      // Renewed early, before it lapses: never sent expired, so never a 401 for it.
      await until(() =>
        Date.now() > (server.issued.get(firstToken) as number) ? true : undefined,
      );
      await emit(1);
      const afterExpiry = await settled(id, 2);
      assert.deepEqual(
        afterExpiry.map((d) => d.lastResponseStatus),
        [204, 204],
      );
      assert.equal(server.fetches - before, 2);

      server.lifetimeS = 60;
      await emit(1);
      await settled(id, 3);
      const live = [...server.issued.keys()].at(-1) as string;
      server.revoked.add(live);
      const fetchesBefore = server.fetches;
      await emit(1);
      const rows = await settled(id, 4);
      assert.equal(rows[0].lastResponseStatus, 204, 'the 401 got a new token and went through');
      assert.equal(rows[0].attempts, 1, 'within the same attempt');
      assert.equal(server.fetches - fetchesBefore, 1, 'one fetch for the revoked token');
      assert.ok(seen.includes(`Bearer ${live}`), 'the revoked token was tried first');
    });

    it('fails the attempt as auth_failed when the token server refuses or cannot be reached', async () => {
      const refused = await subscribe(oauth({ clientSecret: 'cs-wrong-000000000000' }));
      const unreachable = await subscribe(oauth({ tokenUrl: 'https://127.0.0.1:9/token' }));
      const before = seen.length;
      await emit(1);
      for (const subscription of [refused, unreachable]) {
        const [delivery] = await settled(subscription.id as string, 1);
        assert.equal(delivery.lastError, 'auth_failed');
        assert.equal(delivery.lastResponseStatus, null);
        const attempts = await ctx.api(
          'GET',
          `/api/v1/webhooks/${subscription.id}/deliveries/${delivery.id}/attempts`,
          { token: tenant.token },
        );
        const [attempt] = attempts.json().data as Row[];
        assert.equal(attempt.errorClass, 'auth_failed');
        assert.match(String(attempt.responseBody), /token server/);
      }
      // Refused credentials only the owner can mend run toward auto-pause, as a 4xx does; a token
      // server out of reach breaks that run, as a 5xx does.
      const runs = await ctx.runtime.database.db
        .selectFrom('webhookSubscriptions')
        .select(['id', 'clientErrorRun', 'consecutiveFailures'])
        .where('id', 'in', [refused.id as string, unreachable.id as string])
        .execute();
      const run = (id: unknown) => runs.find((r) => r.id === id);
      assert.deepEqual(run(refused.id), {
        id: refused.id,
        clientErrorRun: 1,
        consecutiveFailures: 1,
      });
      assert.deepEqual(run(unreachable.id), {
        id: unreachable.id,
        clientErrorRun: 0,
        consecutiveFailures: 1,
      });
      // The other subscriptions' deliveries arrived, each with a token; none came without one.
      assert.deepEqual(
        seen.slice(before).filter((authorization) => !authorization.startsWith('Bearer ')),
        [],
      );
    });

    it("keeps only a refusal's RFC 6749 error, with every form of the credentials sent masked", async () => {
      // Plain, form-encoded, percent-encoded and base64 forms of this secret all differ.
      const secret = 'cs/9f+Q= z&ü-41d7';
      const subscription = await subscribe(
        oauth({ tokenUrl: tokenHost.url('/echo/token'), clientSecret: secret }),
      );
      await emit(1);
      const [delivery] = await settled(subscription.id as string, 1);
      assert.equal(delivery.lastError, 'auth_failed');
      const attempts = await ctx.api(
        'GET',
        `/api/v1/webhooks/${subscription.id}/deliveries/${delivery.id}/attempts`,
        { token: tenant.token },
      );
      const [attempt] = attempts.json().data as Row[];
      const words = String(attempt.responseBody);
      assert.match(
        words,
        /^the token server answered 400: invalid_client \(got authorization=Basic \*\*\* pair=tourops-webhooks:\*\*\* form=grant_type=client_credentials&scope=webhooks\)$/,
      );
      const form = new URLSearchParams({ v: secret }).toString().slice(2);
      const pairs = [`${server.clientId}:${secret}`, `${server.clientId}:${form}`];
      const texts = await shownTexts(ctx, tenant, logs.lines);
      noneShown(texts, [
        secret,
        form,
        encodeURIComponent(secret),
        ...pairs.map((pair) => Buffer.from(pair).toString('base64')),
      ]);
      assert.ok(!texts.some((text) => text.includes('"echo"')), 'nothing else of the answer');
    });

    it('masks the access token when the receiver echoes it; takes a token answer past 16 KiB', async () => {
      const echo = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: receiver.url('/echo'), events: ['client.created'], auth: oauth() },
      });
      const large = await subscribe(oauth({ tokenUrl: tokenHost.url('/large/token') }));
      await emit(1);
      const [echoed] = await settled(echo.json().data.id, 1);
      const attempts = await ctx.api(
        'GET',
        `/api/v1/webhooks/${echo.json().data.id}/deliveries/${echoed.id}/attempts`,
        { token: tenant.token },
      );
      const [attempt] = attempts.json().data as Row[];
      assert.equal(JSON.parse(String(attempt.responseBody)).authorization, 'Bearer ***');
      const [delivered] = await settled(large.id as string, 1);
      assert.equal(delivered.lastResponseStatus, 204, JSON.stringify(delivered));
    });

    it('keeps the secret by *** for the same token URL only; refuses a token URL that is not HTTPS', async () => {
      const subscription = await subscribe(oauth());
      const id = subscription.id as string;
      const patch = (auth: Row) =>
        ctx.api('PATCH', `/api/v1/webhooks/${id}`, { token: tenant.token, body: { auth } });
      const kept = await patch(oauth({ clientSecret: '***', scope: 'webhooks' }));
      assert.equal(kept.statusCode, 200, kept.body);
      const moved = await patch(oauth({ clientSecret: '***', tokenUrl: 'https://localhost:9/t' }));
      assert.deepEqual(Object.keys(moved.json().errors), ['auth.clientSecret']);
      for (const tokenUrl of ['http://127.0.0.1:9/token', 'not a url', 'amqp://127.0.0.1/']) {
        const refused = await patch(oauth({ tokenUrl }));
        assert.equal(refused.statusCode, 422, tokenUrl);
        assert.deepEqual(Object.keys(refused.json().errors), ['auth.tokenUrl'], tokenUrl);
        // A token endpoint is never a broker: no broker hint.
        assert.doesNotMatch(refused.json().errors['auth.tokenUrl'][0], /broker|amqps/, tokenUrl);
      }
      // The scheme as URLs read it: upper case is https too.
      const upper = tokenHost.url('/oauth/token').replace(/^https:/, 'HTTPS:');
      const shouted = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: {
          url: receiver.url('/oauth'),
          events: ['client.created'],
          auth: oauth({ tokenUrl: upper }),
        },
      });
      assert.equal(shouted.statusCode, 201, shouted.body);
      await emit(1);
      const [delivery] = await settled(id, 1);
      assert.equal(delivery.lastResponseStatus, 204, 'the kept secret still fetches tokens');
    });

    it('never shows the client secret or a token: reads, attempt logs, log lines, stored row', async () => {
      const texts = await shownTexts(ctx, tenant, logs.lines);
      assert.ok(server.issued.size > 3);
      noneShown(texts, [server.clientSecret, ...server.issued.keys()]);
    });
  });
}

for (const backend of BACKENDS) {
  describe(`receiver authentication: a TLS client certificate (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let server: Server;
    let origin: string;
    let pki: ClientPki;
    let worker: ReturnType<typeof startWorker>;
    /** The subject each request's client certificate named ('' for none or an untrusted one). */
    const peers: string[] = [];

    before(async () => {
      pki = await testClientPki();
      const ca = await testCa();
      ctx = await createWebhookTestContext(backend, { WEBHOOK_RETRY_SCHEDULE: '5s' });
      tenant = await createTenant(ctx);
      // Asks every client for a certificate of the client CA; answers 403 without one.
      server = createServer(
        { key: ca.key, cert: ca.cert, ca: pki.ca, requestCert: true, rejectUnauthorized: false },
        (request, response) => {
          const socket = request.socket as TLSSocket;
          peers.push(socket.authorized ? String(socket.getPeerCertificate().subject.CN) : '');
          request.resume();
          request.on('end', () => {
            response.statusCode = socket.authorized ? 204 : 403;
            response.end();
          });
        },
      );
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      origin = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
      worker = startWorker(ctx.runtime, { pollIntervalMs: 20 });
    });
    after(async () => {
      await worker?.stop();
      server?.closeAllConnections();
      await new Promise((resolve) => server?.close(resolve));
      await ctx?.close();
    });

    const create = (body: Row) =>
      ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { events: ['client.created'], ...body },
      });
    const lastStatus = (id: string) =>
      until(async () => {
        const list = await ctx.api('GET', `/api/v1/webhooks/${id}/deliveries`, {
          token: tenant.token,
        });
        const [latest] = list.json().data as Row[];
        return latest && latest.lastResponseStatus !== null ? latest.lastResponseStatus : undefined;
      }, `an answer to ${id}`);

    it("presents the subscription's certificate; without it the receiver refuses", async () => {
      const withCertificate = await create({
        url: `${origin}/mtls`,
        clientCertificate: pki.client,
      });
      assert.equal(withCertificate.statusCode, 201, withCertificate.body);
      const shown = withCertificate.json().data.clientCertificate as Row;
      assert.equal(shown.subject, 'CN=tourops-client, O=Tour Ops');
      assert.match(String(shown.fingerprint256), /^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
      assert.ok(Date.parse(String(shown.notAfter)) > Date.now() + 29 * 86_400_000);
      const without = await create({ url: `${origin}/plain` });
      await createClient(ctx, tenant, { displayName: 'mTLS' });
      assert.equal(await lastStatus(withCertificate.json().data.id), 204);
      assert.equal(await lastStatus(without.json().data.id), 403);
      assert.ok(peers.includes('tourops-client'));
      const list = await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token });
      assert.equal(list.body.includes('PRIVATE KEY'), false, 'the key is never shown');
    });

    it('refuses a certificate that does not match its key, is no PEM, has expired, or is for a broker', async () => {
      const url = `${origin}/refused`;
      const mismatched = await create({
        url,
        clientCertificate: {
          certificate: pki.client.certificate,
          privateKey: pki.other.privateKey,
        },
      });
      assert.deepEqual(Object.keys(mismatched.json().errors), ['clientCertificate.privateKey']);
      const garbage = await create({
        url,
        clientCertificate: { certificate: 'not a certificate', privateKey: pki.client.privateKey },
      });
      assert.deepEqual(Object.keys(garbage.json().errors), ['clientCertificate.certificate']);
      const broker = await create({
        url: 'amqp://guest:guest@127.0.0.1:5672/?exchange=tourops.mtls&routingKey=x',
        clientCertificate: pki.client,
      });
      assert.deepEqual(Object.keys(broker.json().errors), ['clientCertificate']);
      /** Why the same pair is refused `days` from now. */
      const refusedIn = (days: number) => {
        const at = new Date(Date.now() + days * 86_400_000);
        const result = nextReceiverSecrets(
          { clientCertificate: pki.client },
          NO_RECEIVER_SECRETS,
          true,
          at,
        );
        assert.ok('errors' in result, `${days} days`);
        return result.errors['clientCertificate.certificate'][0];
      };
      // Past its notAfter (30 days), it is refused as expired; before its notBefore, as not yet valid.
      assert.match(refusedIn(31), /^expired on /);
      assert.match(refusedIn(-1), /^is not valid before /);
      // A CA-signed certificate whose key TLS will not present (RSA 512) is refused at write.
      const weak = await create({ url, clientCertificate: pki.weak });
      assert.equal(weak.statusCode, 422, weak.body);
      assert.deepEqual(Object.keys(weak.json().errors), ['clientCertificate.certificate']);
      assert.match(
        weak.json().errors['clientCertificate.certificate'][0],
        /^cannot be presented: its key \(rsa 512 bits\) is too weak for TLS/,
      );
    });

    it('counts a certificate expiring within 14 days in /metrics, and the portal names it', async () => {
      const soon = await create({ url: `${origin}/soon`, clientCertificate: pki.soon });
      assert.equal(soon.statusCode, 201, soon.body);
      const metrics = await ctx.app.inject({ url: '/metrics' });
      assert.match(metrics.body, /^tourops_webhook_client_certificates_expiring 1$/m);
      const link = await ctx.api('POST', '/api/v1/portal/sessions', {
        token: tenant.token,
        body: { readOnly: true },
      });
      const client = new PortalClient(ctx);
      const landed = await client.signIn(pathOf(link.json().data.url));
      assert.equal(landed.statusCode, 303);
      const page = await client.get(`/portal/endpoints/${soon.json().data.id}`);
      assert.match(
        page.body,
        /Client certificate<\/dt><dd><code>CN&#61;expiring-soon, O&#61;Tour Ops<\/code>/,
      );
      assert.match(page.body, /expires within 14 days: replace it/);
    });
  });
}
