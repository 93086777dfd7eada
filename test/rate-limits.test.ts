import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { freePort } from '../bench/processes.ts';
import { createHttpApp } from '../src/runtime.ts';
import { BACKENDS, createTestContext, type TestContext } from './helpers/context.ts';
import { createTenant, mintToken, type TenantFixture } from './helpers/fixtures.ts';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

const get = (app: FastifyInstance, token?: string, url = '/api/v1/me') =>
  app.inject({ method: 'GET', url, headers: token ? { authorization: `Bearer ${token}` } : {} });

describe('rate limits in memory (embedded database)', () => {
  let ctx: TestContext;
  let tenant: TenantFixture;

  before(async () => {
    ctx = await createTestContext('sqlite', {
      env: {
        RATE_LIMIT_PER_MIN: '5',
        RATE_LIMIT_BURST_PER_SEC: '100',
        RATE_LIMIT_IP_PER_MIN: '1000',
      },
    });
    tenant = await createTenant(ctx);
  });
  after(() => ctx.close());

  it('sends the sustained window on every authenticated response, then 429 with Retry-After', async () => {
    const remaining: number[] = [];
    for (let i = 0; i < 5; i++) {
      const response = await ctx.api('GET', '/api/v1/me', { token: tenant.token });
      assert.equal(response.statusCode, 200);
      assert.equal(response.headers['x-ratelimit-limit'], '5');
      remaining.push(Number(response.headers['x-ratelimit-remaining']));
      const reset = Number(response.headers['x-ratelimit-reset']);
      assert.ok(Number.isInteger(reset) && reset >= 1 && reset <= 60, `reset ${reset}`);
    }
    assert.deepEqual(remaining, [4, 3, 2, 1, 0]);

    const limited = await ctx.api('GET', '/api/v1/me', { token: tenant.token });
    assert.equal(limited.statusCode, 429);
    assert.equal(limited.json().type, 'http://api.test/errors/rate-limited');
    const retryAfter = Number(limited.headers['retry-after']);
    assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60);
    assert.equal(limited.headers['x-ratelimit-remaining'], '0');
    assert.equal(limited.headers['x-ratelimit-scope'], undefined);
  });

  it('counts per token, and errors after authentication carry the headers too', async () => {
    const narrow = await mintToken(ctx, tenant.id, ['trips:read']);
    const denied = await ctx.api('GET', '/api/v1/clients', { token: narrow.token });
    assert.equal(denied.statusCode, 403);
    assert.equal(denied.headers['x-ratelimit-limit'], '5');
    assert.equal(denied.headers['x-ratelimit-remaining'], '4');
  });

  it('enforces the per-second burst on its own', async () => {
    const burst = await createTestContext('sqlite', {
      env: { RATE_LIMIT_BURST_PER_SEC: '3', RATE_LIMIT_PER_MIN: '1000' },
    });
    try {
      const t = await createTenant(burst);
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await get(burst.app, t.token)).statusCode);
      assert.deepEqual(statuses, [200, 200, 200, 429]);
      const limited = await get(burst.app, t.token);
      assert.equal(limited.headers['retry-after'], '1');
      assert.equal(limited.headers['x-ratelimit-limit'], '1000');
    } finally {
      await burst.close();
    }
  });

  it('guards by IP before authentication, with X-RateLimit-Scope: ip', async () => {
    const guarded = await createTestContext('sqlite', { env: { RATE_LIMIT_IP_PER_MIN: '4' } });
    try {
      const statuses = [];
      for (const token of [undefined, 'tk_test_0000000000000000000000000Z', undefined, 'bad']) {
        statuses.push((await get(guarded.app, token)).statusCode);
      }
      assert.deepEqual(statuses, [401, 401, 401, 401]);
      const blocked = await get(guarded.app);
      assert.equal(blocked.statusCode, 429);
      assert.equal(blocked.headers['x-ratelimit-scope'], 'ip');
      assert.ok(Number(blocked.headers['retry-after']) >= 1);
      assert.equal(blocked.json().type, 'http://api.test/errors/rate-limited');
      // Health checks are outside the API and its guard.
      assert.equal((await guarded.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
    } finally {
      await guarded.close();
    }
  });
});

describe('the per-IP guard behind a load balancer (TRUSTED_PROXIES)', () => {
  /** One unauthenticated request from `peer`, relaying for `client` when given. */
  const from = (app: FastifyInstance, peer: string, client?: string) =>
    app.inject({
      method: 'GET',
      url: '/api/v1/me',
      remoteAddress: peer,
      headers: client ? { 'x-forwarded-for': client } : {},
    });

  it('counts each client a trusted balancer names, and a spoofed header from anyone else as its sender', async () => {
    const behind = await createTestContext('sqlite', {
      env: { RATE_LIMIT_IP_PER_MIN: '2', TRUSTED_PROXIES: '10.0.0.5, 10.0.1.0/24' },
    });
    try {
      // Two clients through two balancers of the trusted set: two requests each pass.
      for (const [peer, client] of [
        ['10.0.0.5', '198.51.100.7'],
        ['10.0.1.9', '198.51.100.7'],
        ['10.0.0.5', '198.51.100.8'],
        ['10.0.1.9', '198.51.100.8'],
      ]) {
        assert.equal((await from(behind.app, peer, client)).statusCode, 401);
      }
      assert.equal((await from(behind.app, '10.0.0.5', '198.51.100.7')).statusCode, 429);
      // A peer outside the set is the client, whatever header it sends.
      for (const client of ['203.0.113.1', '203.0.113.2']) {
        assert.equal((await from(behind.app, '192.0.2.44', client)).statusCode, 401);
      }
      assert.equal((await from(behind.app, '192.0.2.44', '203.0.113.3')).statusCode, 429);
    } finally {
      await behind.close();
    }
    const direct = await createTestContext('sqlite', { env: { RATE_LIMIT_IP_PER_MIN: '2' } });
    try {
      // Unset: X-Forwarded-For is never believed.
      for (const client of ['203.0.113.1', '203.0.113.2']) {
        assert.equal((await from(direct.app, '10.0.0.5', client)).statusCode, 401);
      }
      assert.equal((await from(direct.app, '10.0.0.5', '203.0.113.3')).statusCode, 429);
    } finally {
      await direct.close();
    }
  });
});

/**
 * Two app instances over one store stand in for two API processes. Requests allowed to one
 * token through the two: exactly `limit`, unless the store failed or was slow (a loaded machine)
 * and a process answered on its own count, which the product counts
 * (tourops_rate_limit_local_only_total): then no more than each its limit.
 */
async function sharedLimitRun(ctx: TestContext, limit: number): Promise<number> {
  const second = await createHttpApp(ctx.runtime);
  const localOnly = async () =>
    (await ctx.runtime.metrics.rateLimitLocalOnly.get()).values[0]?.value ?? 0;
  try {
    const t = await createTenant(ctx);
    const before = await localOnly();
    let ok = 0;
    for (let i = 0; i < limit * 2; i++) {
      const response = await get(i % 2 === 0 ? ctx.app : second, t.token);
      if (response.statusCode === 200) ok += 1;
      else assert.equal(response.statusCode, 429);
    }
    if ((await localOnly()) > before) {
      assert.ok(ok >= limit && ok <= 2 * limit, `${ok} allowed, some on a process's own count`);
      return limit;
    }
    return ok;
  } finally {
    await second.close();
  }
}

describe('rate limits shared through Redis', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext('sqlite', {
      env: { REDIS_URL, RATE_LIMIT_PER_MIN: '10', RATE_LIMIT_BURST_PER_SEC: '1000' },
    });
  });
  after(() => ctx.close());

  it('two API processes together allow one token exactly its limit', async () => {
    assert.equal(await sharedLimitRun(ctx, 10), 10);
  });
});

describe('rate limits when Redis is down', () => {
  let ctx: TestContext;
  before(async () => {
    // Nothing listens there (a port found free): the store fails and the process's own count
    // answers.
    const port = await freePort();
    ctx = await createTestContext('sqlite', { env: { REDIS_URL: `redis://127.0.0.1:${port}` } });
  });
  after(() => ctx.close());

  it('keeps answering, never 500', async () => {
    const t = await createTenant(ctx);
    for (let i = 0; i < 5; i++) {
      const response = await get(ctx.app, t.token);
      assert.equal(response.statusCode, 200);
      assert.ok(response.headers['x-ratelimit-remaining']);
    }
  });
});

if (BACKENDS.includes('postgres')) {
  describe('rate limits shared through PostgreSQL (no Redis)', () => {
    let ctx: TestContext;
    before(async () => {
      ctx = await createTestContext('postgres', {
        env: { RATE_LIMIT_PER_MIN: '10', RATE_LIMIT_BURST_PER_SEC: '1000' },
      });
    });
    after(() => ctx.close());

    it('two API processes together allow one token exactly its limit', async () => {
      assert.equal(await sharedLimitRun(ctx, 10), 10);
    });
  });
}
