import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../src/config.ts';
import { createRuntime, type Runtime } from '../src/runtime.ts';
import { hashToken } from '../src/services/tokens-service.ts';
import { ManualClock } from './helpers/clock.ts';
import { BACKENDS, createTestContext, type TestContext } from './helpers/context.ts';
import { createTenant, mintToken, type TenantFixture } from './helpers/fixtures.ts';
import { eventually, until } from './helpers/until.ts';

for (const backend of BACKENDS) {
  describe(`authentication, plans and /me (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    const clock = new ManualClock('2026-11-21T10:00:00.000Z');

    before(async () => {
      ctx = await createTestContext(backend, { clock });
      tenant = await createTenant(ctx);
    });
    after(() => ctx.close());

    it('introspects the token without revealing it', async () => {
      const response = await ctx.api('GET', '/api/v1/me', { token: tenant.token });
      assert.equal(response.statusCode, 200);
      const body = response.json();
      assert.equal(body.data, undefined, '/me is not wrapped in data');
      assert.deepEqual(Object.keys(body.tenant).sort(), ['active', 'id', 'name', 'slug']);
      assert.equal(body.tenant.id, tenant.id);
      assert.equal(body.tenant.slug, tenant.slug);
      assert.equal(body.tenant.active, true);
      assert.deepEqual(Object.keys(body.token).sort(), [
        'createdAt',
        'expiresAt',
        'id',
        'lastUsedAt',
        'name',
        'prefix',
        'revoked',
        'scopes',
      ]);
      assert.equal(body.token.prefix, tenant.token.slice(0, 12));
      assert.equal(body.token.scopes.length, 10);
      assert.equal(body.token.revoked, false);
      assert.equal(body.tier, 'pro');
      assert.equal(body.env, 'test');
      assert.ok(!response.body.includes(tenant.token));
    });

    it('stores only a SHA-256 of the token', async () => {
      const row = await ctx.runtime.repositories.tokens.findById(tenant.tokenId);
      assert.equal(row?.tokenHash, hashToken(tenant.token));
      assert.ok(!JSON.stringify(row).includes(tenant.token));
    });

    const expect401 = async (authorization: string | undefined, detail: RegExp) => {
      const response = await ctx.app.inject({
        method: 'GET',
        url: '/api/v1/trips',
        headers: authorization === undefined ? {} : { authorization },
      });
      assert.equal(response.statusCode, 401);
      assert.equal(response.headers['www-authenticate'], 'Bearer');
      const problem = response.json();
      assert.equal(problem.type, 'http://api.test/errors/unauthorized');
      assert.match(problem.detail, detail);
    };

    it('names each 401 case: missing, malformed, unknown, revoked, expired, inactive tenant', async () => {
      await expect401(undefined, /missing/);
      await expect401('Bearer', /malformed/);
      await expect401('Basic abc', /malformed/);
      await expect401('Bearer tk_test_short', /malformed/);
      await expect401('Bearer tk_prod_0123456789ABCDEFGHJKMNPQRS', /malformed/);
      await expect401('Bearer tk_test_0123456789ABCDEFGHJKMNPQRS', /unknown/);

      const revoked = await mintToken(ctx, tenant.id, ['*']);
      await ctx.admin('POST', `/admin/v1/tokens/${revoked.id}/revoke`);
      await expect401(`Bearer ${revoked.token}`, /revoked/);

      const expiring = await mintToken(
        ctx,
        tenant.id,
        ['*'],
        undefined,
        '2026-11-21T11:00:00.000Z',
      );
      const fresh = await ctx.api('GET', '/api/v1/me', { token: expiring.token });
      assert.equal(fresh.json().token.expiresAt, '2026-11-21T11:00:00.000Z');
      clock.set('2026-11-21T11:00:00.000Z');
      await expect401(`Bearer ${expiring.token}`, /expired/);
      clock.set('2026-11-21T10:00:00.000Z');

      const paused = await createTenant(ctx);
      await ctx.admin('PATCH', `/admin/v1/tenants/${paused.id}`, { active: false });
      await expect401(`Bearer ${paused.token}`, /inactive/);
    });

    it('answers 403 plan-required on every endpoint, /me included, for a plan without API access', async () => {
      const free = await createTenant(ctx, { tier: 'free' });
      for (const url of ['/api/v1/me', '/api/v1/trips', '/api/v1/libraries/hotels']) {
        const response = await ctx.api('GET', url, { token: free.token });
        assert.equal(response.statusCode, 403);
        const problem = response.json();
        assert.equal(problem.type, 'http://api.test/errors/plan-required');
        assert.deepEqual(problem.required_plans, ['starter', 'pro', 'enterprise']);
        assert.equal(problem.current_plan, 'free');
      }
    });

    it('answers 403 scope-required naming the scope, and /me needs no scope', async () => {
      const narrow = await mintToken(ctx, tenant.id, ['trips:read']);
      const denied = await ctx.api('GET', '/api/v1/clients', { token: narrow.token });
      assert.equal(denied.statusCode, 403);
      assert.equal(denied.json().type, 'http://api.test/errors/scope-required');
      assert.equal(denied.json().required_scope, 'clients:read');
      const write = await ctx.api('POST', '/api/v1/trips', { token: narrow.token, body: {} });
      assert.equal(write.json().required_scope, 'trips:write', 'scope is checked before the body');
      assert.equal(
        (await ctx.api('GET', '/api/v1/trips', { token: narrow.token })).statusCode,
        200,
      );
      assert.equal((await ctx.api('GET', '/api/v1/me', { token: narrow.token })).statusCode, 200);
    });

    it('writes lastUsedAt at most once a minute per token', async () => {
      const minted = await mintToken(ctx, tenant.id, ['trips:read']);
      const read = () => ctx.runtime.repositories.tokens.findById(minted.id);
      assert.equal((await read())?.lastUsedAt, null);

      clock.set('2026-11-21T10:00:00.000Z');
      await ctx.api('GET', '/api/v1/trips', { token: minted.token });
      const first = await until(async () => {
        const row = await read();
        return row?.lastUsedAt !== null ? row : undefined;
      }, 'the first lastUsedAt');
      assert.equal(first?.lastUsedAt, '2026-11-21T10:00:00.000Z');

      // The request decides whether to write (off its path, not awaited): count what it asks for.
      const { tokens } = ctx.runtime.repositories;
      const touch = tokens.touchLastUsed;
      let writes = 0;
      tokens.touchLastUsed = (...args) => {
        writes += 1;
        return touch.apply(tokens, args);
      };
      clock.set('2026-11-21T10:00:59.000Z');
      try {
        for (let i = 0; i < 5; i++) await ctx.api('GET', '/api/v1/trips', { token: minted.token });
      } finally {
        tokens.touchLastUsed = touch;
      }
      assert.equal(writes, 0, 'no write within the minute');
      assert.equal((await read())?.lastUsedAt, '2026-11-21T10:00:00.000Z');

      clock.set('2026-11-21T10:01:00.000Z');
      await ctx.api('GET', '/api/v1/trips', { token: minted.token });
      const second = await until(async () => {
        const row = await read();
        return row?.lastUsedAt !== '2026-11-21T10:00:00.000Z' ? row : undefined;
      }, 'the second lastUsedAt');
      assert.equal(second?.lastUsedAt, '2026-11-21T10:01:00.000Z');
      const me = await ctx.api('GET', '/api/v1/me', { token: minted.token });
      assert.equal(me.json().token.lastUsedAt, '2026-11-21T10:01:00.000Z');
    });

    it('applies revocation, deactivation and plan changes at once, even for a token just used', async () => {
      const t = await createTenant(ctx);
      const spare = await mintToken(ctx, t.id, ['*']);
      assert.equal((await ctx.api('GET', '/api/v1/me', { token: t.token })).statusCode, 200);
      await ctx.admin('POST', `/admin/v1/tokens/${t.tokenId}/revoke`);
      const revoked = await ctx.api('GET', '/api/v1/me', { token: t.token });
      assert.equal(revoked.statusCode, 401);
      assert.match(revoked.json().detail, /revoked/);

      assert.equal((await ctx.api('GET', '/api/v1/me', { token: spare.token })).statusCode, 200);
      await ctx.admin('PATCH', `/admin/v1/tenants/${t.id}`, { tier: 'free' });
      assert.equal(
        (await ctx.api('GET', '/api/v1/me', { token: spare.token })).json().type,
        'http://api.test/errors/plan-required',
      );
      await ctx.admin('PATCH', `/admin/v1/tenants/${t.id}`, { tier: 'pro', active: false });
      assert.match(
        (await ctx.api('GET', '/api/v1/me', { token: spare.token })).json().detail,
        /inactive/,
      );
    });

    it('mints tokens in the documented format, prefixed with the deployment env', async () => {
      const minted = await mintToken(ctx, tenant.id, ['trips:read']);
      assert.match(minted.token, /^tk_test_[0-9A-HJKMNP-TV-Z]{26}$/);
    });
  });
}

if (BACKENDS.includes('postgres')) {
  describe('auth changes across processes (postgres)', () => {
    let serving: TestContext;
    let other: Runtime;
    // Frozen: the auth cache never expires here, so only a notification can evict it.
    const frozen = new ManualClock('2026-11-21T10:00:00.000Z');

    before(async () => {
      serving = await createTestContext('postgres', { clock: frozen });
      const config = loadConfig({
        DATABASE_URL: serving.runtime.config.databaseUrl as string,
        SECRET_KEY: serving.runtime.config.secretKey as string,
        LOG_LEVEL: 'silent',
      });
      other = await createRuntime(config, { logger: pino({ level: 'silent' }) });
    });
    after(async () => {
      await other.close();
      await serving.close();
    });

    it('hears another process revoke a cached token, or deactivate its tenant', async () => {
      const tenant = await createTenant(serving);
      const spare = await mintToken(serving, tenant.id, ['*']);
      assert.equal(
        (await serving.api('GET', '/api/v1/me', { token: tenant.token })).statusCode,
        200,
      );
      assert.equal(
        (await serving.api('GET', '/api/v1/me', { token: spare.token })).statusCode,
        200,
      );

      await other.services.tokens.revoke(tenant.tokenId);
      await eventually(
        async () =>
          (await serving.api('GET', '/api/v1/me', { token: tenant.token })).statusCode === 401,
        'the revocation reached the serving process',
      );

      await other.services.tenants.update(tenant.id, { active: false });
      await eventually(
        async () =>
          (await serving.api('GET', '/api/v1/me', { token: spare.token })).statusCode === 401,
        'the deactivation reached the serving process',
      );
    });
  });
}
