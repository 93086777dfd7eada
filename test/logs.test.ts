import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SHOWN_QUERY_VALUES } from '../src/http/pipeline/log-fields.ts';
import { startWorker } from '../src/start-worker.ts';
import { createTestContext } from './helpers/context.ts';
import { createTenant } from './helpers/fixtures.ts';
import { operationsOf } from './helpers/fuzz.ts';
import { HttpsReceiver, testCa } from './helpers/https-receiver.ts';
import { captureLogs as capture } from './helpers/log-capture.ts';
import { until } from './helpers/until.ts';

describe('logs that explain what happened', () => {
  it('a request line names the tenant and the token (never the token itself) and redacts the query', async () => {
    const { lines, logger } = capture('info');
    const ctx = await createTestContext('sqlite', { logger });
    try {
      const tenant = await createTenant(ctx);
      const response = await ctx.api('GET', '/api/v1/trips?limit=2&access_token=oops', {
        token: tenant.token,
      });
      assert.equal(response.statusCode, 422); // access_token is not a parameter of the list
      const line = lines.find((l) => l.msg === 'request' && l.url === '/api/v1/trips');
      assert.ok(line, 'a request line');
      assert.equal(line.query, 'limit=2&access_token=[redacted]');
      assert.equal(line.tenantId, tenant.id);
      assert.equal(line.tokenId, tenant.tokenId);
      assert.equal(line.statusCode, 422);
      const all = JSON.stringify(lines);
      assert.ok(!all.includes(tenant.token), 'the token never appears');
      assert.ok(!all.includes('oops'), 'the redacted value never appears');
    } finally {
      await ctx.close();
    }
  });

  it("a portal link's secret and its session cookie never reach a log line", async () => {
    const { lines, logger } = capture('info');
    const ctx = await createTestContext('sqlite', { logger });
    try {
      const tenant = await createTenant(ctx);
      const made = await ctx.api('POST', '/api/v1/portal/sessions', { token: tenant.token });
      const path = new URL(made.json().data.url).pathname;
      // A person's visit: the link's page, then its Sign in button (with the page's CSRF token).
      const visit = await ctx.app.inject({ method: 'GET', url: path });
      const csrfCookie = (visit.cookies as Array<{ name: string; value: string }>)[0];
      const csrf = /name="_csrf" value="([^"]+)"/.exec(visit.body)?.[1] ?? '';
      const used = await ctx.app.inject({
        method: 'POST',
        url: path,
        headers: {
          cookie: `${csrfCookie.name}=${csrfCookie.value}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        payload: new URLSearchParams({ _csrf: csrf }).toString(),
      });
      const cookie = (used.cookies as Array<{ name: string; value: string }>).find(
        (c) => c.name === 'tourops_portal',
      );
      assert.ok(cookie, used.body);
      await ctx.app.inject({
        method: 'GET',
        url: '/portal/',
        headers: { cookie: `${cookie.name}=${cookie.value}` },
      });
      await ctx.app.inject({ method: 'GET', url: path });
      // The route template: '/portal' for the list (the link's route keeps its `:secret`).
      const page = lines.find((l) => l.msg === 'request' && l.url === '/portal');
      assert.equal(page?.tenantId, tenant.id, 'a page names its tenant');
      const all = JSON.stringify(lines);
      assert.ok(!all.includes(path.split('/').at(-1) as string), 'the link secret never appears');
      assert.ok(!all.includes(cookie.value), 'the cookie never appears');
    } finally {
      await ctx.close();
    }
  });

  it('one info line per failed delivery attempt, debug for a delivered one', async () => {
    const { lines, logger } = capture('debug');
    const ca = await testCa();
    const ctx = await createTestContext('sqlite', {
      logger,
      env: {
        WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
        WEBHOOK_CA_FILE: ca.caFile,
        WEBHOOK_RETRY_SCHEDULE: '20ms',
      },
    });
    let calls = 0;
    const receiver = await HttpsReceiver.start({
      responder: () => ({ status: ++calls === 1 ? 503 : 204 }),
    });
    const worker = startWorker(ctx.runtime, { pollIntervalMs: 50 });
    try {
      const tenant = await createTenant(ctx);
      const created = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: receiver.url('/logs'), events: ['client.created'] },
      });
      const subscriptionId = created.json().data.id;
      await ctx.api('POST', '/api/v1/webhooks/test', { token: tenant.token, body: {} });
      const delivered = await until(async () =>
        lines.find((l) => l.msg === 'webhook attempt delivered'),
      );
      const failed = lines.filter((l) => l.msg === 'webhook attempt failed');
      assert.equal(failed.length, 1);
      assert.equal(failed[0].level, 30, 'info');
      assert.equal(delivered.level, 20, 'debug');
      assert.deepEqual(
        { ...failed[0], time: 0, pid: 0, hostname: '', ms: 0 },
        {
          level: 30,
          time: 0,
          pid: 0,
          hostname: '',
          msg: 'webhook attempt failed',
          subscriptionId,
          deliveryId: failed[0].deliveryId,
          attempt: 1,
          status: 503,
          error: null,
          ms: 0,
          next: 'pending',
          nextAttemptAt: failed[0].nextAttemptAt,
        },
      );
      assert.match(String(failed[0].nextAttemptAt), /^\d{4}-\d{2}-\d{2}T/);
      assert.match(String(failed[0].deliveryId), /^dlv_/);
      assert.equal(delivered.attempt, 2);
    } finally {
      await worker.stop();
      await receiver.close();
      await ctx.close();
    }
  });

  it("shows query values only for the documents' non-text parameters, and q is text", async () => {
    const ctx = await createTestContext('sqlite');
    try {
      const documented = new Map(
        [
          ...operationsOf((await ctx.app.inject({ url: '/v1/openapi.json' })).json(), 'public'),
          ...operationsOf(
            (await ctx.adminRequest('GET', '/admin/v1/openapi.json')).json(),
            'admin',
          ),
        ]
          .flatMap((operation) => operation.parameters)
          .filter((parameter) => parameter.in === 'query')
          .map((parameter) => [parameter.name, parameter.schema] as const),
      );
      assert.ok(documented.has('limit') && documented.has('q'), [...documented.keys()].join());
      for (const name of SHOWN_QUERY_VALUES)
        assert.ok(documented.has(name), `${name} is a parameter`);
      // A documented free-text parameter (a string with no enum, format or id name) is never shown.
      for (const [name, schema] of documented) {
        const text = schema.type === 'string' && !schema.enum && !schema.format;
        if (text && !/Id$|^cursor$|^kind$/.test(name)) {
          assert.ok(!SHOWN_QUERY_VALUES.has(name), `${name} is free text`);
        }
      }
      assert.ok(!SHOWN_QUERY_VALUES.has('q'));
    } finally {
      await ctx.close();
    }
  });
});
