import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { PROBLEM_TYPES } from '../src/lib/problems.ts';
import { BACKENDS, createTestContext, type TestContext } from './helpers/context.ts';
import { createTenant, createTrip, type TenantFixture, tripBody } from './helpers/fixtures.ts';

for (const backend of BACKENDS) {
  describe(`errors and request handling (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;

    before(async () => {
      ctx = await createTestContext(backend);
      tenant = await createTenant(ctx);
    });
    after(() => ctx.close());

    const expect422 = async (
      response: {
        statusCode: number;
        headers: Record<string, unknown>;
        json(): Record<string, unknown>;
      },
      field: string,
    ) => {
      assert.equal(response.statusCode, 422);
      assert.match(String(response.headers['content-type']), /^application\/problem\+json/);
      const problem = response.json() as {
        type: string;
        title: string;
        status: number;
        detail: string;
        errors: Record<string, string[]>;
      };
      assert.equal(problem.type, 'http://api.test/errors/validation-failed');
      assert.equal(problem.status, 422);
      assert.equal(typeof problem.title, 'string');
      assert.equal(typeof problem.detail, 'string');
      assert.ok(
        problem.errors[field]?.length,
        `errors.${field} in ${JSON.stringify(problem.errors)}`,
      );
    };

    it('answers bad JSON with 422 and changes nothing', async () => {
      const before = await ctx.runtime.repositories.trips.count(tenant.id);
      const response = await ctx.api('POST', '/api/v1/trips', {
        token: tenant.token,
        body: '{"title": "x",',
        headers: { 'content-type': 'application/json' },
      });
      await expect422(response, 'body');
      assert.equal(await ctx.runtime.repositories.trips.count(tenant.id), before);
    });

    it('answers a wrong Content-Type with 422, not 415', async () => {
      for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
        const response = await ctx.api('POST', '/api/v1/trips', {
          token: tenant.token,
          body: JSON.stringify(tripBody(tenant)),
          headers: { 'content-type': type },
        });
        await expect422(response, 'body');
      }
    });

    it('accepts application/json with a charset', async () => {
      const response = await ctx.api('POST', '/api/v1/trips', {
        token: tenant.token,
        body: JSON.stringify(tripBody(tenant)),
        headers: { 'content-type': 'application/json; charset=utf-8' },
      });
      assert.equal(response.statusCode, 201);
    });

    it('answers a body over 256 KB with 422, and accepts one just under', async () => {
      const big = { ...tripBody(tenant), notes: 'x'.repeat(262_144) };
      await expect422(
        await ctx.api('POST', '/api/v1/trips', { token: tenant.token, body: big }),
        'body',
      );
      // Just under the limit, the body is read and fails only its field rule.
      const near = { ...tripBody(tenant), longDescription: 'y'.repeat(250_000) };
      await expect422(
        await ctx.api('POST', '/api/v1/trips', { token: tenant.token, body: near }),
        'longDescription',
      );
    });

    it('rejects unknown members, non-object bodies and empty bodies', async () => {
      await expect422(
        await ctx.api('POST', '/api/v1/trips', {
          token: tenant.token,
          body: { ...tripBody(tenant), colour: 'red' },
        }),
        'colour',
      );
      await expect422(
        await ctx.api('POST', '/api/v1/trips', { token: tenant.token, body: [tripBody(tenant)] }),
        'body',
      );
      await expect422(
        await ctx.api('POST', '/api/v1/trips', {
          token: tenant.token,
          body: '',
          headers: { 'content-type': 'application/json' },
        }),
        'body',
      );
      await expect422(await ctx.api('POST', '/api/v1/trips', { token: tenant.token }), 'body');
    });

    it('reports nested field paths such as tags.3', async () => {
      const response = await ctx.api('POST', '/api/v1/clients', {
        token: tenant.token,
        body: { kind: 'individual', displayName: 'A', tags: ['a', 'b', 'c', 'x'.repeat(41)] },
      });
      await expect422(response, 'tags.3');
    });

    it('rejects out-of-range or non-integer limit and unknown query parameters', async () => {
      for (const limit of ['0', '101', 'abc', '5.5', '-1']) {
        await expect422(
          await ctx.api('GET', `/api/v1/trips?limit=${limit}`, { token: tenant.token }),
          'limit',
        );
      }
      await expect422(
        await ctx.api('GET', '/api/v1/trips?colour=red', { token: tenant.token }),
        'colour',
      );
      const ok = await ctx.api('GET', '/api/v1/trips?limit=100', { token: tenant.token });
      assert.equal(ok.statusCode, 200);
    });

    it('rejects undecodable cursors and cursors of another endpoint', async () => {
      await createTrip(ctx, tenant);
      await createTrip(ctx, tenant);
      for (const cursor of ['garbage', '!!!', Buffer.from('trips:nope').toString('base64url')]) {
        await expect422(
          await ctx.api('GET', `/api/v1/trips?cursor=${cursor}`, { token: tenant.token }),
          'cursor',
        );
      }
      const page = (await ctx.api('GET', '/api/v1/trips?limit=1', { token: tenant.token })).json();
      assert.ok(page.meta.cursor);
      await expect422(
        await ctx.api('GET', `/api/v1/clients?cursor=${page.meta.cursor}`, { token: tenant.token }),
        'cursor',
      );
      const next = await ctx.api('GET', `/api/v1/trips?limit=1&cursor=${page.meta.cursor}`, {
        token: tenant.token,
      });
      assert.equal(next.statusCode, 200);
    });

    it('answers unknown routes and wrong methods with a 404 problem, never 400/405', async () => {
      for (const [method, url] of [
        ['GET', '/api/v1/nope'],
        ['DELETE', '/api/v1/trips'],
        ['PUT', '/api/v1/trips/trp_x'],
        ['GET', '/api/v2/trips'],
        ['GET', '/nothing-here'],
      ] as const) {
        const response = await ctx.app.inject({
          method,
          url,
          headers: { authorization: `Bearer ${tenant.token}` },
        });
        assert.equal(response.statusCode, 404, `${method} ${url}`);
        assert.match(String(response.headers['content-type']), /^application\/problem\+json/);
        assert.equal(response.json().type, 'http://api.test/errors/not-found');
      }
      // A path that exists under other methods says which, the status still 404.
      const wrongMethod = async (method: 'PUT' | 'DELETE', url: string) =>
        (await ctx.app.inject({ method, url })).json().detail;
      assert.equal(
        await wrongMethod('PUT', '/api/v1/trips/trp_x?expand=1'),
        'PUT is not a method of this path; it answers GET, PATCH.',
      );
      assert.equal(
        await wrongMethod('DELETE', '/api/v1/trips'),
        'DELETE is not a method of this path; it answers GET, POST.',
      );
      assert.equal(await wrongMethod('PUT', '/api/v1/nope'), 'The route was not found.');
    });

    it('turns a fault into 500 internal with the request id and no internals', async () => {
      const trips = ctx.runtime.services.trips;
      const original = trips.get;
      trips.get = async () => {
        throw new Error('database exploded at /secret/path.ts:42');
      };
      try {
        const response = await ctx.api('GET', '/api/v1/trips/trp_whatever', {
          token: tenant.token,
          headers: { 'service-request-id': 'req-fault-1' },
        });
        assert.equal(response.statusCode, 500);
        const problem = response.json();
        assert.equal(problem.type, 'http://api.test/errors/internal');
        assert.equal(problem.requestId, 'req-fault-1');
        assert.match(problem.detail, /req-fault-1/);
        assert.doesNotMatch(response.body, /exploded|secret|\.ts/);
      } finally {
        trips.get = original;
      }
    });

    it('echoes Service-Request-Id or generates one, on success and on errors', async () => {
      const echoed = await ctx.api('GET', '/api/v1/me', {
        token: tenant.token,
        headers: { 'service-request-id': 'abc-123' },
      });
      assert.equal(echoed.headers['service-request-id'], 'abc-123');
      const generated = await ctx.api('GET', '/api/v1/me', { token: tenant.token });
      assert.match(String(generated.headers['service-request-id']), /^[0-9a-f-]{36}$/);
      const failed = await ctx.api('GET', '/api/v1/me');
      assert.ok(failed.headers['service-request-id']);
      const notFound = await ctx.app.inject({ method: 'GET', url: '/nope' });
      assert.ok(notFound.headers['service-request-id']);
    });

    it('serves a human page for every problem type', async () => {
      for (const slug of Object.keys(PROBLEM_TYPES)) {
        const response = await ctx.app.inject({ method: 'GET', url: `/errors/${slug}` });
        assert.equal(response.statusCode, 200, slug);
        assert.match(String(response.headers['content-type']), /^text\/html/);
        assert.match(
          response.body,
          new RegExp(PROBLEM_TYPES[slug as keyof typeof PROBLEM_TYPES].title),
        );
      }
      assert.equal((await ctx.app.inject({ method: 'GET', url: '/errors/nope' })).statusCode, 404);
    });

    it('answers health and readiness without authentication', async () => {
      const health = await ctx.app.inject({ method: 'GET', url: '/healthz' });
      assert.equal(health.statusCode, 200);
      assert.deepEqual(health.json(), { status: 'ok' });
      // Ready, with what the delivery queue holds (nothing here).
      const ready = await ctx.app.inject({ method: 'GET', url: '/readyz' });
      assert.equal(ready.statusCode, 200);
      assert.deepEqual(ready.json(), {
        status: 'ok',
        deliveries: { pending: 0, stuck: 0, oldestDueAgeSeconds: 0 },
      });
    });
  });
}
