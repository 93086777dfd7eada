import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { seedDemo } from '../src/demo.ts';
import { BACKENDS, createTestContext, type TestContext } from './helpers/context.ts';

type Row = Record<string, unknown> & { id: string };

for (const backend of BACKENDS) {
  describe(`admin API and demo seed (${backend})`, () => {
    let ctx: TestContext;

    before(async () => {
      ctx = await createTestContext(backend);
    });
    after(() => ctx.close());

    const admin = (method: 'GET' | 'POST' | 'PATCH', url: string, body?: unknown, token?: string) =>
      ctx.adminRequest(method, url, body, token);

    it('rejects a wrong admin secret with 401', async () => {
      const response = await admin(
        'POST',
        '/admin/v1/tenants',
        { name: 'X', slug: 'x', tier: 'pro' },
        'wrong',
      );
      assert.equal(response.statusCode, 401);
      assert.equal(response.json().type, 'http://api.test/errors/unauthorized');
    });

    it('manages tenants: plan defaults, overrides, slug conflicts', async () => {
      const created = await admin('POST', '/admin/v1/tenants', {
        name: 'Acme Tours',
        slug: 'acme',
        tier: 'starter',
      });
      assert.equal(created.statusCode, 201);
      const tenant = created.json().data;
      assert.deepEqual(Object.keys(tenant).sort(), [
        'active',
        'id',
        'name',
        'slug',
        'tier',
        'tripQuota',
        'webhookEndpointCap',
      ]);
      assert.match(tenant.id, /^ten_/);
      assert.equal(tenant.tripQuota, 100);
      assert.equal(tenant.webhookEndpointCap, 0);

      const duplicate = await admin('POST', '/admin/v1/tenants', {
        name: 'Other',
        slug: 'acme',
        tier: 'pro',
      });
      assert.equal(duplicate.statusCode, 409);
      const badTier = await admin('POST', '/admin/v1/tenants', {
        name: 'Other',
        slug: 'other',
        tier: 'gold',
      });
      assert.equal(badTier.statusCode, 422);
      assert.ok(badTier.json().errors.tier);

      const patched = (
        await admin('PATCH', `/admin/v1/tenants/${tenant.id}`, { tier: 'enterprise', tripQuota: 5 })
      ).json().data;
      assert.equal(patched.tier, 'enterprise');
      assert.equal(patched.tripQuota, 5);
      assert.equal(patched.webhookEndpointCap, 100);
      const reset = (
        await admin('PATCH', `/admin/v1/tenants/${tenant.id}`, { tripQuota: null })
      ).json().data;
      assert.equal(
        reset.tripQuota,
        null,
        'null restores the plan default: unlimited on enterprise',
      );
      assert.equal(
        (await admin('GET', `/admin/v1/tenants/${tenant.id}`)).json().data.tier,
        'enterprise',
      );
      assert.equal((await admin('GET', '/admin/v1/tenants/ten_missing')).statusCode, 404);
    });

    it('adds members once per email and mints tokens only for real members and scopes', async () => {
      const tenant = (
        await admin('POST', '/admin/v1/tenants', { name: 'M', slug: 'members', tier: 'pro' })
      ).json().data;
      const member = await admin('POST', `/admin/v1/tenants/${tenant.id}/members`, {
        email: 'a@m.example',
        role: 'admin',
      });
      assert.equal(member.statusCode, 201);
      assert.deepEqual(Object.keys(member.json().data).sort(), ['email', 'id', 'role']);
      assert.equal(
        (
          await admin('POST', `/admin/v1/tenants/${tenant.id}/members`, {
            email: 'a@m.example',
            role: 'owner',
          })
        ).statusCode,
        409,
      );

      const stranger = await admin('POST', `/admin/v1/tenants/${tenant.id}/tokens`, {
        scopes: ['*'],
        createdBy: 'mem_nobody',
      });
      assert.equal(stranger.statusCode, 422);
      const badScope = await admin('POST', `/admin/v1/tenants/${tenant.id}/tokens`, {
        scopes: ['trips:delete'],
      });
      assert.equal(badScope.statusCode, 422);
      // A token born expired could never be used: 422 on expiresAt, nothing minted.
      const before = (await ctx.runtime.database.db.selectFrom('apiTokens').select('id').execute())
        .length;
      for (const expiresAt of ['2020-01-01T00:00:00.000Z', new Date().toISOString()]) {
        const past = await admin('POST', `/admin/v1/tenants/${tenant.id}/tokens`, {
          scopes: ['*'],
          expiresAt,
        });
        assert.equal(past.statusCode, 422, past.body);
        assert.match(String(past.headers['content-type']), /application\/problem\+json/);
        assert.match(past.json().errors.expiresAt[0], /future/);
      }
      const after = (await ctx.runtime.database.db.selectFrom('apiTokens').select('id').execute())
        .length;
      assert.equal(after, before);
      const minted = await admin('POST', `/admin/v1/tenants/${tenant.id}/tokens`, {
        scopes: ['trips:read', 'trips:read', 'clients:read'],
        name: 'CRM sync',
        createdBy: member.json().data.id,
      });
      assert.equal(minted.statusCode, 201);
      const body = minted.json();
      assert.deepEqual(body.data.scopes, ['trips:read', 'clients:read']);
      assert.equal(body.data.revoked, false);
      const revoked = (await admin('POST', `/admin/v1/tokens/${body.data.id}/revoke`)).json().data;
      assert.equal(revoked.revoked, true);
      assert.equal((await admin('POST', '/admin/v1/tokens/tok_missing/revoke')).statusCode, 404);
      const notifications = await admin('GET', `/admin/v1/tenants/${tenant.id}/notifications`);
      assert.deepEqual(notifications.json(), { data: [] });
    });

    it('seeds a realistic demo tenant whose token works on every list', async () => {
      const demo = await seedDemo(ctx.runtime, 'demo-test');
      const counts: Record<string, number> = {};
      for (const list of [
        'trips',
        'bookings',
        'clients',
        'payments',
        'libraries/cities',
        'libraries/hotels',
        'libraries/activities',
        'libraries/vehicles',
        'libraries/guides',
      ]) {
        const response = await ctx.api('GET', `/api/v1/${list}`, { token: demo.token });
        assert.equal(response.statusCode, 200, list);
        counts[list] = response.json().data.length;
      }
      assert.ok(
        Object.values(counts).every((n) => n > 0),
        JSON.stringify(counts),
      );
      const me = (await ctx.api('GET', '/api/v1/me', { token: demo.token })).json();
      assert.equal(me.tier, 'pro');
      assert.equal(me.token.scopes.length, 10);
      const bookings = (await ctx.api('GET', '/api/v1/bookings', { token: demo.token })).json()
        .data as Row[];
      assert.ok(bookings.some((b) => b.status === 'confirmed'));
      await assert.rejects(seedDemo(ctx.runtime, 'demo-test'), /already exists/);
    });
  });
}

describe('admin API without ADMIN_API_TOKEN', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext('sqlite', { env: { ADMIN_API_TOKEN: '' } });
  });
  after(() => ctx.close());

  it('does not exist: every admin route answers 404', async () => {
    for (const [method, url] of [
      ['POST', '/admin/v1/tenants'],
      ['GET', '/admin/v1/tenants/ten_x'],
      ['GET', '/admin/v1/openapi.json'],
    ] as const) {
      const response = await ctx.app.inject({
        method,
        url,
        headers: { authorization: 'Bearer anything' },
      });
      assert.equal(response.statusCode, 404, url);
      assert.equal(response.json().type, 'http://api.test/errors/not-found');
    }
  });
});
