import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createHttpApp } from '../src/runtime.ts';
import { ManualClock } from './helpers/clock.ts';
import { BACKENDS, createTestContext, type TestContext } from './helpers/context.ts';
import {
  createTenant,
  createTrip,
  mintToken,
  type TenantFixture,
  tripBody,
} from './helpers/fixtures.ts';

for (const backend of BACKENDS) {
  describe(`idempotency keys (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    const clock = new ManualClock('2026-11-21T10:00:00.000Z');

    before(async () => {
      ctx = await createTestContext(backend, {
        clock,
        // A subscription to a loopback URL (no worker runs here, nothing is sent).
        env: { IDEMPOTENCY_TTL: '1h', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' },
      });
      tenant = await createTenant(ctx);
    });
    after(() => ctx.close());

    const post = (key: string, body: unknown, token = tenant.token, url = '/api/v1/clients') =>
      ctx.api('POST', url, { token, body, headers: { 'idempotency-key': key } });
    const clientCount = async (t = tenant) =>
      (await ctx.api('GET', '/api/v1/clients?limit=100', { token: t.token })).json().data.length;
    const eventCount = async (t = tenant) =>
      (await ctx.runtime.repositories.events.listForTenant(t.id)).length;

    /** Every byte the database holds: the SQLite file with its WAL, or a pg_dump. */
    const databaseBytes = (): string => {
      if (backend === 'postgres') {
        return execFileSync('pg_dump', ['--data-only', ctx.env.DATABASE_URL], {
          encoding: 'latin1',
          maxBuffer: 256 * 1024 * 1024,
        });
      }
      return readdirSync(ctx.env.DATA_DIR)
        .filter((name) => name.startsWith('tourops.sqlite'))
        .map((name) => readFileSync(join(ctx.env.DATA_DIR, name)).toString('latin1'))
        .join('');
    };

    it('keeps no secret at rest: stored answers are sealed, replays are still byte for byte', async () => {
      const body = { url: 'https://127.0.0.1:9/hook', events: ['dispute.opened'] };
      const created = await post('key-secret-create', body, tenant.token, '/api/v1/webhooks');
      assert.equal(created.statusCode, 201, created.body);
      const { data, signingKey } = created.json();
      const rotateKey = { 'idempotency-key': 'key-secret-rotate' };
      const rotate = () =>
        ctx.api('POST', `/api/v1/webhooks/${data.id}/rotate-key`, {
          token: tenant.token,
          headers: rotateKey,
        });
      const rotated = await rotate();
      assert.equal(rotated.statusCode, 200, rotated.body);
      const newKey = rotated.json().signingKey;
      assert.match(newKey, /^whsec_/);

      const bytes = databaseBytes();
      assert.ok(bytes.includes(data.id), 'the dump holds the rows');
      for (const secret of [signingKey, newKey]) {
        assert.ok(!bytes.includes(secret), 'a signing key is stored in plaintext');
      }
      const replayCreate = await post('key-secret-create', body, tenant.token, '/api/v1/webhooks');
      assert.equal(replayCreate.headers['idempotency-replayed'], 'true');
      assert.equal(replayCreate.body, created.body);
      const replayRotate = await rotate();
      assert.equal(replayRotate.headers['idempotency-replayed'], 'true');
      assert.equal(replayRotate.body, rotated.body);
    });

    it('replays the first response byte for byte, with no second side effect', async () => {
      const before = [await clientCount(), await eventCount()];
      const first = await post('key-replay-1', { kind: 'individual', displayName: 'Once' });
      assert.equal(first.statusCode, 201);
      assert.equal(first.headers['idempotency-replayed'], undefined);
      const second = await post('key-replay-1', { kind: 'individual', displayName: 'Once' });
      assert.equal(second.statusCode, 201);
      assert.equal(second.headers['idempotency-replayed'], 'true');
      assert.equal(second.body, first.body);
      assert.equal(second.headers['content-type'], first.headers['content-type']);
      assert.notEqual(second.headers['service-request-id'], first.headers['service-request-id']);
      assert.deepEqual([await clientCount(), await eventCount()], [before[0] + 1, before[1] + 1]);
    });

    it('answers 409 idempotency-key-reuse for another body, path or method', async () => {
      await post('key-reuse', { kind: 'individual', displayName: 'A' });
      const otherBody = await post('key-reuse', { kind: 'individual', displayName: 'B' });
      assert.equal(otherBody.statusCode, 409);
      assert.equal(otherBody.json().type, 'http://api.test/errors/idempotency-key-reuse');
      const otherPath = await post('key-reuse', tripBody(tenant), tenant.token, '/api/v1/trips');
      assert.equal(otherPath.statusCode, 409);
      const trip = await createTrip(ctx, tenant);
      const otherMethod = await ctx.api('PATCH', `/api/v1/trips/${trip.id}`, {
        token: tenant.token,
        body: { title: 'x' },
        headers: { 'idempotency-key': 'key-reuse' },
      });
      assert.equal(otherMethod.statusCode, 409);
    });

    it('scopes keys per tenant', async () => {
      const other = await createTenant(ctx);
      const mine = await post('shared-key', { kind: 'company', displayName: 'Mine' });
      const theirs = await post(
        'shared-key',
        { kind: 'company', displayName: 'Mine' },
        other.token,
      );
      assert.equal(theirs.statusCode, 201);
      assert.equal(theirs.headers['idempotency-replayed'], undefined);
      assert.notEqual(theirs.json().data.id, mine.json().data.id);
    });

    it('stores 4xx answers and replays them; rejects malformed keys with 422', async () => {
      const invalid = await post('key-422', { kind: 'robot', displayName: '' });
      assert.equal(invalid.statusCode, 422);
      const replay = await post('key-422', { kind: 'robot', displayName: '' });
      assert.equal(replay.statusCode, 422);
      assert.equal(replay.headers['idempotency-replayed'], 'true');
      assert.equal(replay.body, invalid.body);

      for (const key of ['', 'x'.repeat(256), 'naïve']) {
        const response = await post(key, { kind: 'individual', displayName: 'K' });
        assert.equal(response.statusCode, 422, JSON.stringify(key));
        assert.ok(response.json().errors['Idempotency-Key']);
      }
    });

    it("stores the token's 403s like other 4xx: a retry once it is allowed replays them", async () => {
      const reader = await mintToken(ctx, tenant.id, ['clients:read']);
      const body = { kind: 'individual', displayName: 'Not yet' };
      const refused = await post('key-scope', body, reader.token);
      assert.equal(refused.statusCode, 403);
      assert.match(refused.json().type, /scope-required$/);
      // Another token of the tenant, allowed this time: the key answers what it answered.
      const replay = await post('key-scope', body);
      assert.equal(replay.statusCode, 403);
      assert.equal(replay.headers['idempotency-replayed'], 'true');
      assert.equal(replay.body, refused.body);

      const free = await createTenant(ctx);
      await ctx.admin('PATCH', `/admin/v1/tenants/${free.id}`, { tier: 'free' });
      const noPlan = await post('key-plan', body, free.token);
      assert.equal(noPlan.statusCode, 403);
      assert.match(noPlan.json().type, /plan-required$/);
      await ctx.admin('PATCH', `/admin/v1/tenants/${free.id}`, { tier: 'pro' });
      const after = await post('key-plan', body, free.token);
      assert.equal(after.headers['idempotency-replayed'], 'true');
      assert.equal(after.body, noPlan.body);
      assert.equal(await clientCount(free), 0);
    });

    it("refuses a token short of the scope before replaying another's answer", async () => {
      const created = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: 'https://127.0.0.1:9/scope', events: ['trip.published'] },
        headers: { 'idempotency-key': 'key-secret' },
      });
      assert.equal(created.statusCode, 201);
      const reader = await mintToken(ctx, tenant.id, ['webhooks:read']);
      const refused = await ctx.api('POST', '/api/v1/webhooks', {
        token: reader.token,
        body: { url: 'https://127.0.0.1:9/scope', events: ['trip.published'] },
        headers: { 'idempotency-key': 'key-secret' },
      });
      assert.equal(refused.statusCode, 403);
      assert.doesNotMatch(refused.body, /whsec_/);
      // The 403 outranks a body that does not parse, too.
      const unparsable = await ctx.api('POST', '/api/v1/webhooks', {
        token: reader.token,
        body: '{"url":',
        headers: { 'content-type': 'application/json', 'idempotency-key': 'key-bad-json' },
      });
      assert.equal(unparsable.statusCode, 403);
    });

    it('replays a finished answer even when a check before the unit of work now fails', async () => {
      const capped = await createTenant(ctx);
      const body = { url: 'https://127.0.0.1:9/capped', events: ['trip.published'] };
      const send = () =>
        ctx.api('POST', '/api/v1/webhooks', {
          token: capped.token,
          body,
          headers: { 'idempotency-key': 'key-capped' },
        });
      const first = await send();
      assert.equal(first.statusCode, 201);
      // The endpoint cap is full now: a new registration would be refused before it locks its key.
      await ctx.admin('PATCH', `/admin/v1/tenants/${capped.id}`, { webhookEndpointCap: 1 });
      const replay = await send();
      assert.equal(replay.statusCode, 201);
      assert.equal(replay.headers['idempotency-replayed'], 'true');
      assert.equal(replay.body, first.body);
    });

    it('replays PATCH too', async () => {
      const trip = await createTrip(ctx, tenant);
      const patch = () =>
        ctx.api('PATCH', `/api/v1/trips/${trip.id}`, {
          token: tenant.token,
          body: { title: 'Patched once' },
          headers: { 'idempotency-key': 'key-patch' },
        });
      const first = await patch();
      const second = await patch();
      assert.equal(second.headers['idempotency-replayed'], 'true');
      assert.equal(second.body, first.body);
      const row = await ctx.runtime.repositories.trips.findById(tenant.id, trip.id);
      assert.equal(row?.version, 2, 'one update, not two');
    });

    it('never stores a 5xx: the key is released and a retry executes', async () => {
      const clients = ctx.runtime.services.clients;
      const original = clients.create;
      clients.create = async () => {
        throw new Error('boom');
      };
      try {
        const failed = await post('key-500', { kind: 'individual', displayName: 'Retry me' });
        assert.equal(failed.statusCode, 500);
      } finally {
        clients.create = original;
      }
      const retried = await post('key-500', { kind: 'individual', displayName: 'Retry me' });
      assert.equal(retried.statusCode, 201);
      assert.equal(retried.headers['idempotency-replayed'], undefined);
    });

    it('commits the side effect and the stored answer together: a failed record undoes both', async () => {
      const keys = ctx.runtime.repositories.idempotency;
      const original = keys.complete;
      const before = [await clientCount(), await eventCount()];
      keys.complete = async () => {
        throw new Error('crash between the side effect and its record');
      };
      try {
        const failed = await post('key-atomic', { kind: 'individual', displayName: 'Atomic' });
        assert.equal(failed.statusCode, 500);
      } finally {
        keys.complete = original;
      }
      // No client, no event, and the key is free: the retry executes exactly once.
      assert.deepEqual([await clientCount(), await eventCount()], before);
      const retried = await post('key-atomic', { kind: 'individual', displayName: 'Atomic' });
      assert.equal(retried.statusCode, 201);
      assert.equal(retried.headers['idempotency-replayed'], undefined);
      assert.deepEqual([await clientCount(), await eventCount()], [before[0] + 1, before[1] + 1]);
    });

    it('keeps a refused write out of the committed answer (service rollback is a savepoint)', async () => {
      const small = await createTenant(ctx, { tier: 'starter' });
      await ctx.admin('PATCH', `/admin/v1/tenants/${small.id}`, { tripQuota: 1 });
      const first = await ctx.api('POST', '/api/v1/trips', {
        token: small.token,
        body: tripBody(small),
        headers: { 'idempotency-key': 'quota-1' },
      });
      assert.equal(first.statusCode, 201);
      const over = await ctx.api('POST', '/api/v1/trips', {
        token: small.token,
        body: tripBody(small),
        headers: { 'idempotency-key': 'quota-2' },
      });
      assert.equal(over.statusCode, 403);
      const replay = await ctx.api('POST', '/api/v1/trips', {
        token: small.token,
        body: tripBody(small),
        headers: { 'idempotency-key': 'quota-2' },
      });
      assert.equal(replay.headers['idempotency-replayed'], 'true');
      assert.equal(replay.body, over.body);
      const trips = await ctx.api('GET', '/api/v1/trips', { token: small.token });
      assert.equal(trips.json().data.length, 1);
    });

    it('lets exactly one of 16 concurrent duplicates execute', async () => {
      const t = await createTenant(ctx);
      const before = [await clientCount(t), await eventCount(t)];
      const second = await createHttpApp(ctx.runtime);
      try {
        const responses = await Promise.all(
          Array.from({ length: 16 }, (_, i) =>
            (i % 2 === 0 ? ctx.app : second).inject({
              method: 'POST',
              url: '/api/v1/clients',
              headers: {
                authorization: `Bearer ${t.token}`,
                'content-type': 'application/json',
                'idempotency-key': 'key-concurrent',
              },
              payload: JSON.stringify({ kind: 'individual', displayName: 'Sixteen times' }),
            }),
          ),
        );
        const executed = responses.filter((r) => r.headers['idempotency-replayed'] === undefined);
        assert.equal(executed.length, 1);
        for (const response of responses) {
          assert.ok([201, 409].includes(response.statusCode), String(response.statusCode));
          if (response.statusCode === 201) assert.equal(response.body, executed[0].body);
        }
        assert.deepEqual(
          [await clientCount(t), await eventCount(t)],
          [before[0] + 1, before[1] + 1],
        );
      } finally {
        await second.close();
      }
    });

    it('forgets keys after IDEMPOTENCY_TTL: a reused expired key executes again', async () => {
      const first = await post('key-ttl', { kind: 'individual', displayName: 'Twice' });
      clock.advance(60 * 60_000);
      const again = await post('key-ttl', { kind: 'individual', displayName: 'Twice' });
      assert.equal(again.statusCode, 201);
      assert.equal(again.headers['idempotency-replayed'], undefined);
      assert.notEqual(again.json().data.id, first.json().data.id);
      clock.advance(60 * 60_000);
      assert.ok((await ctx.runtime.services.idempotency.purgeExpired()) >= 1);
    });

    /** Keys stored straight into the table, expiring at the given instants. */
    const storeKeys = async (prefix: string, expiries: string[]) => {
      const createdAt = clock.now().toISOString();
      const rows = expiries.map((expiresAt, i) => ({
        tenantId: tenant.id,
        key: `${prefix}-${i}`,
        fingerprint: 'f',
        status: 'done' as const,
        responseStatus: 201,
        responseType: 'application/json',
        responseBody: '{}',
        createdAt,
        expiresAt,
      }));
      for (let i = 0; i < rows.length; i += 500) {
        await ctx.runtime.database.db
          .insertInto('idempotencyKeys')
          .values(rows.slice(i, i + 500))
          .execute();
      }
    };
    const keysExpired = async (expired: boolean) => {
      const now = clock.now().toISOString();
      const { n } = await ctx.runtime.database.db
        .selectFrom('idempotencyKeys')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('expiresAt', expired ? '<=' : '>', now)
        .executeTakeFirstOrThrow();
      return Number(n);
    };

    it('purges expired keys in statements of a bounded size, same-instant expiries across statements included', async () => {
      const now = clock.now().getTime();
      const at = (ms: number) => new Date(now + ms).toISOString();
      // 600 keys expiring at one instant (more than a statement takes), 450 at distinct ones, and
      // keys that have not expired yet.
      await storeKeys(
        'purge-tie',
        Array.from({ length: 600 }, () => at(-3_600_000)),
      );
      await storeKeys(
        'purge-spread',
        Array.from({ length: 450 }, (_, i) => at(-i * 1000)),
      );
      await storeKeys('purge-live', [at(1), at(60_000), at(3_600_000)]);
      const expired = await keysExpired(true);
      const live = await keysExpired(false);
      assert.ok(expired >= 1050, String(expired));

      const batches: number[] = [];
      const purged = await ctx.runtime.services.idempotency.purgeExpired({
        batchSize: 250,
        pauseFactor: 0,
        onBatch: (keys) => batches.push(keys),
      });
      assert.equal(purged, expired);
      assert.ok(
        batches.every((keys) => keys <= 250),
        batches.join(' '),
      );
      assert.equal(batches.length, Math.floor(expired / 250) + 1, batches.join(' '));
      assert.deepEqual([await keysExpired(true), await keysExpired(false)], [0, live]);
    });

    it('stops a purge between its statements when asked to', async () => {
      const now = clock.now().getTime();
      await storeKeys(
        'purge-stop',
        Array.from({ length: 300 }, (_, i) => new Date(now - i).toISOString()),
      );
      const stop = new AbortController();
      const purged = await ctx.runtime.services.idempotency.purgeExpired({
        batchSize: 100,
        pauseFactor: 0,
        signal: stop.signal,
        onBatch: () => stop.abort(),
      });
      assert.equal(purged, 100);
      assert.equal(await keysExpired(true), 200);
      assert.equal(await ctx.runtime.services.idempotency.purgeExpired(), 200);
    });

    it('replaces a row an earlier version left in_progress, and a replay answers after it', async () => {
      const now = clock.now();
      await ctx.runtime.database.db
        .insertInto('idempotencyKeys')
        .values({
          tenantId: tenant.id,
          key: 'key-left',
          fingerprint: 'from an earlier version',
          status: 'in_progress',
          responseStatus: null,
          responseType: null,
          responseBody: null,
          createdAt: now.toISOString(),
          expiresAt: new Date(now.getTime() + 60 * 60_000).toISOString(),
        })
        .execute();
      const first = await post('key-left', { kind: 'individual', displayName: 'Left' });
      assert.equal(first.statusCode, 201);
      assert.equal(first.headers['idempotency-replayed'], undefined);
      const replay = await post('key-left', { kind: 'individual', displayName: 'Left' });
      assert.equal(replay.headers['idempotency-replayed'], 'true');
      assert.equal(replay.body, first.body);
    });
  });
}
