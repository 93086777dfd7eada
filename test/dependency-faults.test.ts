import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import pino from 'pino';
import { loadConfig } from '../src/config.ts';
import { createHttpApp, createRuntime, type Runtime } from '../src/runtime.ts';
import { ADMIN_TOKEN } from './helpers/context.ts';
import { PgCluster, postgresBin, RedisServer } from './helpers/dependencies.ts';
import { eventually } from './helpers/until.ts';

interface Harness {
  app: FastifyInstance;
  runtime: Runtime;
  logs: Array<Record<string, unknown>>;
  dataDir: string;
}

/** An in-process API (real HTTP app, real database) whose log lines the test can read. */
async function startApi(env: Record<string, string>): Promise<Harness> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tourops-faults-'));
  const logs: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => logs.push(JSON.parse(line)) });
  const config = loadConfig({
    ADMIN_API_TOKEN: ADMIN_TOKEN,
    DATA_DIR: dataDir,
    PUBLIC_BASE_URL: 'http://api.test',
    RATE_LIMIT_BURST_PER_SEC: '100000',
    RATE_LIMIT_PER_MIN: '1000000',
    RATE_LIMIT_IP_PER_MIN: '1000000',
    ...env,
  });
  const runtime = await createRuntime(config, { logger });
  const app = await createHttpApp(runtime, logger);
  await app.ready();
  return { app, runtime, logs, dataDir };
}

async function stopApi(harness: Harness | undefined): Promise<void> {
  if (!harness) return;
  await harness.app.close().catch(() => undefined);
  await harness.runtime.close().catch(() => undefined);
  rmSync(harness.dataDir, { recursive: true, force: true });
}

/** A pro tenant's all-scopes token, made through the admin API. */
async function mint(
  app: FastifyInstance,
  tenantId?: string,
): Promise<{ token: string; tenantId: string }> {
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };
  let id = tenantId;
  if (!id) {
    const tenant = await app.inject({
      method: 'POST',
      url: '/admin/v1/tenants',
      headers: admin,
      payload: JSON.stringify({
        name: 'Faults',
        slug: `faults-${randomBytes(3).toString('hex')}`,
        tier: 'pro',
      }),
    });
    assert.equal(tenant.statusCode, 201, tenant.body);
    id = tenant.json().data.id as string;
  }
  const minted = await app.inject({
    method: 'POST',
    url: `/admin/v1/tenants/${id}/tokens`,
    headers: admin,
    payload: JSON.stringify({ scopes: ['*'], name: 'faults' }),
  });
  assert.equal(minted.statusCode, 201, minted.body);
  return { token: minted.json().token, tenantId: id };
}

/** The answer to one request through the in-process app. */
async function call(
  app: FastifyInstance,
  method: 'GET' | 'POST',
  url: string,
  token?: string,
  payload?: unknown,
) {
  return app.inject({
    method,
    url,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(payload === undefined
        ? {}
        : {
            'content-type': 'application/json',
            'idempotency-key': randomBytes(8).toString('hex'),
          }),
    },
    payload: payload === undefined ? undefined : JSON.stringify(payload),
  });
}

function assertUnavailable(response: Awaited<ReturnType<typeof call>>, label: string) {
  assert.equal(response.statusCode, 503, `${label}: ${response.body}`);
  assert.match(String(response.headers['content-type']), /^application\/problem\+json/);
  assert.equal(response.json().type, 'http://api.test/errors/service-unavailable', label);
  assert.ok(Number(response.headers['retry-after']) >= 1, `${label}: Retry-After`);
}

/**
 * How the 503s of the last outage were answered, from the product's own record (the log line
 * "database available again", see OutageLog): by the breaker (`breaker_cut`, `breaker_at_once`),
 * or by what else ended each request's wait. How soon the breaker answers is proven on an
 * injected clock (src/db/outage-breaker.test.ts); here, which way each request went.
 */
function answeredInOutage(harness: Harness): Record<string, number> {
  const recovered = harness.logs.filter((line) => line.msg === 'database available again');
  assert.ok(recovered.length > 0, 'the outage ended');
  return recovered[recovered.length - 1].answered as Record<string, number>;
}

/** What a request that waited out one of its own time-outs is answered by. */
const TIME_OUTS = [
  '57014',
  'Query read timeout',
  'timeout exceeded when trying to connect',
  'Connection terminated due to connection timeout',
  'readiness probe timed out',
];
const BY_BREAKER = ['breaker_cut', 'breaker_at_once'];
const total = (answered: Record<string, number>) =>
  Object.values(answered).reduce((sum, n) => sum + n, 0);

const logCount = (harness: Harness, pattern: RegExp) =>
  harness.logs.filter((line) => pattern.test(String(line.msg))).length;

/** A throwaway cluster with an in-process API on it (`env`: the API's time-outs). */
function clusterWithApi(env: Record<string, string>): { cluster: PgCluster; api: Harness } {
  let cluster: PgCluster | undefined;
  let api: Harness | undefined;
  before(async () => {
    cluster = await PgCluster.start();
    api = await startApi({
      DATABASE_URL: cluster.url,
      SECRET_KEY: randomBytes(32).toString('hex'),
      ...env,
    });
  });
  after(async () => {
    try {
      cluster?.thaw();
      await stopApi(api);
    } finally {
      cluster?.destroy();
    }
  });
  return {
    get cluster() {
      return cluster as PgCluster;
    },
    get api() {
      return api as Harness;
    },
  };
}

describe('PostgreSQL frozen and stopped (a throwaway cluster)', {
  skip: postgresBin() === null,
}, () => {
  const faults = clusterWithApi({
    DATABASE_STATEMENT_TIMEOUT: '1s',
    DATABASE_CONNECT_TIMEOUT: '500ms',
  });

  it('answers 503 service-unavailable with Retry-After while frozen; recovers when thawed', async () => {
    const harness = faults.api;
    const { token, tenantId } = await mint(harness.app);
    assert.equal((await call(harness.app, 'GET', '/api/v1/trips', token)).statusCode, 200);

    faults.cluster.freeze();
    try {
      const answers = await Promise.all([
        call(harness.app, 'GET', '/api/v1/trips', token),
        call(harness.app, 'GET', '/api/v1/clients', token),
        call(harness.app, 'POST', '/api/v1/clients', token, {
          kind: 'individual',
          displayName: 'Frozen',
        }),
        call(harness.app, 'GET', '/api/v1/me', `tk_test_${'0'.repeat(26)}`), // unknown token: a lookup
        call(harness.app, 'GET', `/admin/v1/tenants/${tenantId}`, ADMIN_TOKEN),
      ]);
      for (const [i, answer] of answers.entries()) assertUnavailable(answer, `request ${i}`);
      assertUnavailable(await call(harness.app, 'GET', '/readyz'), '/readyz');
    } finally {
      faults.cluster.thaw();
    }
    assert.equal(logCount(harness, /database unavailable/), 1, 'one warning for the outage');
    assert.equal(logCount(harness, /unhandled error/), 0, 'no error and stack per request');

    await eventually(
      async () => (await call(harness.app, 'GET', '/api/v1/trips', token)).statusCode === 200,
      'reads succeed again after SIGCONT, without a restart',
    );
    assert.equal((await call(harness.app, 'GET', '/readyz')).statusCode, 200);
    assert.equal(logCount(harness, /database available again/), 1);
    // Each wait ended by the breaker or by a time-out of this API's (its connect time-out is
    // shorter than the breaker's wait): nothing hung.
    const answered = answeredInOutage(harness);
    assert.ok(total(answered) >= 6, JSON.stringify(answered));
    for (const cause of Object.keys(answered)) {
      assert.ok([...BY_BREAKER, ...TIME_OUTS].includes(cause), JSON.stringify(answered));
    }
  });

  it('answers 503 at once while stopped for real, and recovers when it is started again', async () => {
    const harness = faults.api;
    const { token } = await mint(harness.app);
    const before = logCount(harness, /database unavailable/);
    faults.cluster.stopServer();
    try {
      for (const url of ['/api/v1/trips', '/api/v1/clients']) {
        assertUnavailable(await call(harness.app, 'GET', url, token), url);
      }
      assertUnavailable(
        await call(harness.app, 'POST', '/api/v1/clients', token, {
          kind: 'company',
          displayName: 'Down',
        }),
        'keyed write',
      );
      assertUnavailable(await call(harness.app, 'GET', '/readyz'), '/readyz');
    } finally {
      faults.cluster.startServer();
    }
    assert.equal(logCount(harness, /database unavailable/), before + 1);
    await eventually(
      async () => (await call(harness.app, 'GET', '/api/v1/clients', token)).statusCode === 200,
      'reads succeed again once the server is back, without a restart',
    );
    const created = await call(harness.app, 'POST', '/api/v1/clients', token, {
      kind: 'company',
      displayName: 'Up',
    });
    assert.equal(created.statusCode, 201, created.body);
    // At once: refused by the stopped server (or the breaker), none waited out a time-out.
    const answered = answeredInOutage(harness);
    assert.ok(total(answered) >= 4, JSON.stringify(answered));
    for (const cause of TIME_OUTS)
      assert.equal(answered[cause], undefined, JSON.stringify(answered));
  });
});

describe('PostgreSQL frozen, with the default time-outs: fail fast', {
  skip: postgresBin() === null,
}, () => {
  // DATABASE_STATEMENT_TIMEOUT 5s and DATABASE_CONNECT_TIMEOUT 2s: the defaults.
  const faults = clusterWithApi({});

  it('answers every request through the breaker, at once once the outage is known, and recovers', async () => {
    const harness = faults.api;
    const { token, tenantId } = await mint(harness.app);
    const requests = () => [
      call(harness.app, 'GET', '/api/v1/trips', token),
      call(harness.app, 'GET', '/api/v1/clients', token),
      call(harness.app, 'POST', '/api/v1/clients', token, {
        kind: 'individual',
        displayName: 'Frozen',
      }),
      call(harness.app, 'GET', '/api/v1/me', `tk_test_${'0'.repeat(26)}`),
      call(harness.app, 'GET', `/admin/v1/tenants/${tenantId}`, ADMIN_TOKEN),
    ];
    // More requests than the pool has connections: some wait for a checkout, not a statement.
    const first = await Promise.all([...requests(), ...requests(), ...requests()]);
    assert.equal(first[0].statusCode, 200);

    faults.cluster.freeze();
    try {
      const early = await Promise.all([...requests(), ...requests(), ...requests()]);
      for (const [i, answer] of early.entries()) assertUnavailable(answer, `first ${i}`);
      const known = await Promise.all(requests());
      for (const [i, answer] of known.entries()) assertUnavailable(answer, `known ${i}`);
      assertUnavailable(await call(harness.app, 'GET', '/readyz'), '/readyz');
    } finally {
      faults.cluster.thaw();
    }
    await eventually(
      async () => (await call(harness.app, 'GET', '/api/v1/trips', token)).statusCode === 200,
      'reads succeed again after SIGCONT',
    );
    assert.equal((await call(harness.app, 'GET', '/readyz')).statusCode, 200);
    // The breaker answered every one (none waited for a statement or connect time-out), those
    // after it opened without a wait: the known five and /readyz at least.
    const answered = answeredInOutage(harness);
    assert.deepEqual(
      Object.keys(answered).filter((cause) => !BY_BREAKER.includes(cause)),
      [],
      JSON.stringify(answered),
    );
    assert.ok(total(answered) >= 21, JSON.stringify(answered));
    assert.ok(answered.breaker_at_once >= 6, JSON.stringify(answered));
  });

  it('still answers through the breaker when the server freezes during a slow statement', async () => {
    const harness = faults.api;
    const { token } = await mint(harness.app);
    // Answered probes while it runs: the server was healthy when this began.
    const slow = sql`select pg_sleep(3)`.execute(harness.runtime.database.db).catch(() => null);
    await sleep(800);
    faults.cluster.freeze();
    try {
      const answers = await Promise.all([
        call(harness.app, 'GET', '/api/v1/trips', token),
        call(harness.app, 'GET', '/api/v1/clients', token),
      ]);
      for (const [i, answer] of answers.entries()) assertUnavailable(answer, `request ${i}`);
    } finally {
      faults.cluster.thaw();
    }
    await slow;
    await eventually(
      async () => (await call(harness.app, 'GET', '/api/v1/trips', token)).statusCode === 200,
      'reads succeed again after SIGCONT',
    );
    // Not the statement time-out: the breaker cut the waits beside the frozen slow statement.
    const answered = answeredInOutage(harness);
    assert.ok((answered.breaker_cut ?? 0) + (answered.breaker_at_once ?? 0) >= 2);
    for (const cause of TIME_OUTS)
      assert.equal(answered[cause], undefined, JSON.stringify(answered));
  });

  it('does not take a slow statement on a healthy server for an outage', async () => {
    const harness = faults.api;
    const { token } = await mint(harness.app);
    const { db } = harness.runtime.database;
    const started = performance.now();
    const slow = sql`select pg_sleep(2.5)`.execute(db);
    await sleep(1_800);
    // The probe was answered: requests beside it go on, and the statement runs to its end.
    const beside = await call(harness.app, 'GET', '/api/v1/trips', token);
    assert.equal(beside.statusCode, 200, beside.body);
    await slow;
    assert.ok(performance.now() - started >= 2_500);
    // The statement time-out still applies.
    await assert.rejects(sql`select pg_sleep(6)`.execute(db), { code: '57014' });
  });
});

describe('Redis killed and frozen (rate-limit counters)', () => {
  let redis: RedisServer;
  let api: Harness | undefined;

  before(async () => {
    redis = await RedisServer.start();
    api = await startApi({ REDIS_URL: redis.url });
  });
  after(async () => {
    redis?.kill();
    await stopApi(api);
  });

  // How long a frozen store may hold a request is LeasedLimiter's time-out, proven in
  // test/leased-limiter.test.ts; here, that the process's own count answered meanwhile
  // (tourops_rate_limit_local_only_total).
  const burst = async (harness: Harness, token: string, count: number) => {
    const answers = await Promise.all(
      Array.from({ length: count }, () => call(harness.app, 'GET', '/api/v1/me', token)),
    );
    for (const response of answers) assert.equal(response.statusCode, 200, response.body);
  };
  const localOnly = async (harness: Harness) =>
    (await harness.runtime.metrics.rateLimitLocalOnly.get()).values[0]?.value ?? 0;

  it('answers on its own count while Redis is frozen, and shares counters again once it is back', async () => {
    const harness = api as Harness;
    const recent = await mint(harness.app);
    await burst(harness, recent.token, 5);
    assert.ok(redis.keys('rl_min*').length > 0, 'counters are in Redis');

    const before = await localOnly(harness);
    redis.freeze();
    try {
      const fresh = await mint(harness.app, recent.tenantId);
      await burst(harness, recent.token, 40);
      await burst(harness, fresh.token, 40);
    } finally {
      redis.thaw();
    }
    assert.ok((await localOnly(harness)) > before, 'decided on the local count while frozen');
    // Once the second in which the store is skipped is over, a new token's counter lands in
    // Redis again (each request until then is counted here alone).
    const later = await mint(harness.app, recent.tenantId);
    await burst(harness, later.token, 3);
    const tokenId = (await call(harness.app, 'GET', '/api/v1/me', later.token)).json().token.id;
    await eventually(async () => {
      assert.equal((await call(harness.app, 'GET', '/api/v1/me', later.token)).statusCode, 200);
      return redis.keys(`*${tokenId}*`).length > 0;
    }, 'the new token is counted in Redis');
  });

  it('allows a token its burst and no more while Redis is killed and restarted every 200 ms', async () => {
    const flapping = await RedisServer.start();
    const harness = await startApi({ REDIS_URL: flapping.url, RATE_LIMIT_BURST_PER_SEC: '30' });
    let stop = false;
    const flap = (async () => {
      while (!stop) {
        await sleep(100);
        await flapping.restart();
        await sleep(100);
      }
    })();
    try {
      const { token } = await mint(harness.app);
      // The burst's window is a second: 3x the burst, sent within it.
      const started = performance.now();
      const answers = [];
      for (let batch = 0; batch < 9; batch++) {
        answers.push(
          ...(await Promise.all(
            Array.from({ length: 10 }, () => call(harness.app, 'GET', '/api/v1/me', token)),
          )),
        );
        await sleep(60);
      }
      // A loaded machine may stretch the sending past one window: each window it spans may allow
      // its burst (the window starts at a token's first request), and no more.
      const windows = Math.floor((performance.now() - started) / 1_000) + 1;
      const allowed = answers.filter((response) => response.statusCode === 200).length;
      const refused = answers.filter((response) => response.statusCode === 429).length;
      assert.equal(allowed + refused, 90);
      assert.ok(allowed <= 33 * windows, `${allowed} allowed of a burst of 30 in ${windows} s`);
      assert.ok(allowed >= 27, `${allowed} allowed of a burst of 30`);
    } finally {
      stop = true;
      await flap;
      flapping.kill();
      await stopApi(harness);
    }
  });

  it('answers on its own count when Redis is killed', async () => {
    const harness = api as Harness;
    const { token } = await mint(harness.app);
    const before = await localOnly(harness);
    redis.kill();
    await sleep(100);
    await burst(harness, token, 40);
    const fresh = await mint(harness.app);
    await burst(harness, fresh.token, 10);
    assert.ok((await localOnly(harness)) > before, 'decided on the local count while killed');
  });
});
