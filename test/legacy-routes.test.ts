import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from './helpers/clock.ts';
import { createTestContext, type TestContext } from './helpers/context.ts';

describe('deprecated recipient routes around the 2026-10-31 sunset', () => {
  let ctx: TestContext;
  const clock = new ManualClock('2026-10-31T23:59:59.000Z');

  before(async () => {
    ctx = await createTestContext('sqlite', {
      clock,
      env: { STOREFRONT_BASE_URL: 'https://shop.test' },
    });
  });
  after(() => ctx.close());

  const cases = [
    ['/client/quotes/q-123', 'https://shop.test/dossier/q-123'],
    ['/client/bookings/b-9?lang=en', 'https://shop.test/dossier/bookings/b-9?lang=en'],
    ['/api/client/quotes/q-123/pdf', 'https://shop.test/dossier/q-123/pdf'],
    ['/api/client/bookings/b-9', 'https://shop.test/dossier/bookings/b-9'],
  ];

  it('redirects with 308 and deprecation headers until the sunset', async () => {
    for (const [url, target] of cases) {
      const response = await ctx.app.inject({ method: 'GET', url });
      assert.equal(response.statusCode, 308, url);
      assert.equal(response.headers.location, target);
      assert.equal(response.headers.deprecation, 'true');
      assert.equal(response.headers.sunset, 'Sat, 31 Oct 2026 23:59:59 GMT');
      assert.equal(response.headers.link, `<${target}>; rel="successor-version"`);
    }
  });

  // Whatever the method, Content-Type or body (the answer comes before the body is read).
  const requests = [
    {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'a=b',
    },
    { method: 'PUT', headers: { 'content-type': 'text/xml' }, payload: '<a/>' },
    { method: 'PATCH', headers: { 'content-type': 'application/json' }, payload: '{not json' },
    {
      method: 'DELETE',
      headers: { 'content-type': 'application/octet-stream' },
      payload: 'x'.repeat(300_000),
    },
    { method: 'OPTIONS', headers: {}, payload: undefined },
  ] as const;

  it('redirects every method and body, never a 422', async () => {
    for (const [url, target] of cases) {
      for (const request of requests) {
        const response = await ctx.app.inject({ url, ...request });
        assert.equal(response.statusCode, 308, `${request.method} ${url}`);
        assert.equal(response.headers.location, target);
        assert.equal(response.headers.deprecation, 'true');
      }
    }
  });

  it('answers 404 with the same headers from the sunset on', async () => {
    clock.set('2026-11-01T00:00:00.000Z');
    for (const [url, target] of cases) {
      const response = await ctx.app.inject({ method: 'GET', url });
      assert.equal(response.statusCode, 404, url);
      assert.equal(response.json().type, 'http://api.test/errors/not-found');
      assert.equal(response.headers.deprecation, 'true');
      assert.equal(response.headers.sunset, 'Sat, 31 Oct 2026 23:59:59 GMT');
      assert.equal(response.headers.link, `<${target}>; rel="successor-version"`);
      for (const request of requests) {
        const other = await ctx.app.inject({ url, ...request });
        assert.equal(other.statusCode, 404, `${request.method} ${url}`);
        assert.equal(other.headers.sunset, 'Sat, 31 Oct 2026 23:59:59 GMT');
      }
    }
  });
});
