import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BACKENDS, createTestContext, type TestContext } from './helpers/context.ts';
import {
  createClient,
  createTenant,
  createTrip,
  type TenantFixture,
  tripBody,
} from './helpers/fixtures.ts';

const TRIP_FIELDS = [
  'id',
  'tripNumber',
  'title',
  'status',
  'tripMode',
  'dateMode',
  'publicSlug',
  'publishedAt',
  'unpublishedAt',
  'startDate',
  'endDate',
  'daysCount',
  'startCityId',
  'endCityId',
  'transportMode',
  'pricingDisplayMode',
  'shortDescription',
  'longDescription',
  'clientId',
  'notes',
  'createdAt',
  'updatedAt',
].sort();

for (const backend of BACKENDS) {
  describe(`trips (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let other: TenantFixture;

    before(async () => {
      ctx = await createTestContext(backend);
      tenant = await createTenant(ctx);
      other = await createTenant(ctx);
    });
    after(() => ctx.close());

    it('creates a draft trip with every field, nullable ones present as null', async () => {
      const response = await ctx.api('POST', '/api/v1/trips', {
        token: tenant.token,
        body: tripBody(tenant),
      });
      assert.equal(response.statusCode, 201);
      const trip = response.json().data;
      assert.deepEqual(Object.keys(trip).sort(), TRIP_FIELDS);
      assert.match(trip.id, /^trp_[0-9A-Z]{26}$/);
      assert.match(trip.tripNumber, /^TR-[0-9A-HJKMNP-TV-Z]{6}$/);
      assert.equal(trip.status, 'draft');
      assert.equal(trip.startDate, '2027-04-01T00:00:00.000Z');
      assert.equal(trip.endDate, '2027-04-05T00:00:00.000Z');
      assert.equal(trip.dateMode, 'range_based');
      assert.equal(trip.transportMode, 'own_fleet');
      assert.equal(trip.pricingDisplayMode, 'per_person');
      assert.equal(trip.publicSlug, null);
      assert.equal(trip.notes, null);
      const stored = await ctx.runtime.repositories.trips.findById(tenant.id, trip.id);
      assert.equal(stored?.createdBy, tenant.ownerId, 'the token creator is the audit actor');
    });

    it("gets a trip, and answers 404 for another tenant's trip", async () => {
      const trip = await createTrip(ctx, tenant);
      const own = await ctx.api('GET', `/api/v1/trips/${trip.id}`, { token: tenant.token });
      assert.equal(own.statusCode, 200);
      assert.deepEqual(own.json().data, trip);
      const foreign = await ctx.api('GET', `/api/v1/trips/${trip.id}`, { token: other.token });
      assert.equal(foreign.statusCode, 404);
      assert.equal(foreign.json().type, 'http://api.test/errors/not-found');
    });

    it('rejects schema failures with every field path in errors, and creates nothing', async () => {
      const before = await ctx.runtime.repositories.trips.count(tenant.id);
      const response = await ctx.api('POST', '/api/v1/trips', {
        token: tenant.token,
        body: {
          title: '',
          startDate: '2027-13-01',
          daysCount: 400,
          startCityId: tenant.cityIds[0],
          extra: 1,
        },
      });
      assert.equal(response.statusCode, 422);
      assert.match(String(response.headers['content-type']), /^application\/problem\+json/);
      const problem = response.json();
      assert.equal(problem.type, 'http://api.test/errors/validation-failed');
      assert.deepEqual(
        Object.keys(problem.errors).sort(),
        ['daysCount', 'endCityId', 'extra', 'title'].sort(),
      );
      assert.equal(await ctx.runtime.repositories.trips.count(tenant.id), before);
    });

    it('rejects impossible dates, endDate before startDate, foreign cities and clients', async () => {
      const foreignClient = await createClient(ctx, other);
      const response = await ctx.api('POST', '/api/v1/trips', {
        token: tenant.token,
        body: tripBody(tenant, {
          startDate: '2027-02-30',
          startCityId: other.cityIds[0],
          clientId: foreignClient.id,
        }),
      });
      assert.equal(response.statusCode, 422);
      assert.deepEqual(Object.keys(response.json().errors).sort(), [
        'clientId',
        'startCityId',
        'startDate',
      ]);
      // A newcomer's tenant has no cities yet: the message says where ids come from.
      assert.match(
        response.json().errors.startCityId[0],
        /GET \/api\/v1\/libraries\/cities.*POST \/admin\/v1\/tenants\/\{tenantId\}\/library\/cities/,
      );
      const order = await ctx.api('POST', '/api/v1/trips', {
        token: tenant.token,
        body: tripBody(tenant, { startDate: '2027-05-10', endDate: '2027-05-01' }),
      });
      assert.equal(order.statusCode, 422);
      assert.deepEqual(order.json().errors, { endDate: ['must be on or after startDate'] });
    });

    it('does not coerce types in bodies', async () => {
      const response = await ctx.api('POST', '/api/v1/trips', {
        token: tenant.token,
        body: tripBody(tenant, { daysCount: '5' }),
      });
      assert.equal(response.statusCode, 422);
      assert.deepEqual(Object.keys(response.json().errors), ['daysCount']);
    });

    it('patches only the given fields, null clears, and the version moves', async () => {
      const client = await createClient(ctx, tenant);
      const trip = await createTrip(ctx, tenant, { notes: 'keep me', shortDescription: 'short' });
      const response = await ctx.api('PATCH', `/api/v1/trips/${trip.id}`, {
        token: tenant.token,
        body: { title: 'Renamed', endDate: null, shortDescription: null, clientId: client.id },
      });
      assert.equal(response.statusCode, 200);
      const patched = response.json().data;
      assert.equal(patched.title, 'Renamed');
      assert.equal(patched.endDate, null);
      assert.equal(patched.dateMode, 'departure_based');
      assert.equal(patched.shortDescription, null);
      assert.equal(patched.notes, 'keep me');
      assert.equal(patched.clientId, client.id);
      assert.equal(patched.startDate, trip.startDate);
      const stored = await ctx.runtime.repositories.trips.findById(tenant.id, trip.id);
      assert.equal(stored?.version, 2);
    });

    it('patch validates dates against the stored ones and answers 404 across tenants', async () => {
      const trip = await createTrip(ctx, tenant);
      const early = await ctx.api('PATCH', `/api/v1/trips/${trip.id}`, {
        token: tenant.token,
        body: { endDate: '2027-03-01' },
      });
      assert.equal(early.statusCode, 422);
      assert.deepEqual(early.json().errors, { endDate: ['must be on or after startDate'] });
      const foreign = await ctx.api('PATCH', `/api/v1/trips/${trip.id}`, {
        token: other.token,
        body: { title: 'x' },
      });
      assert.equal(foreign.statusCode, 404);
      const unchanged = await ctx.api('GET', `/api/v1/trips/${trip.id}`, { token: tenant.token });
      assert.equal(unchanged.json().data.title, trip.title);
    });

    it('filters by status (unknown values ignored) and publishedAt[gte]', async () => {
      const t = await createTenant(ctx);
      const a = await createTrip(ctx, t);
      const b = await createTrip(ctx, t);
      await ctx.admin('POST', `/admin/v1/trips/${a.id}/status`, { status: 'active' });
      const published = await ctx.admin<{ data: { publishedAt: string } }>(
        'POST',
        `/admin/v1/trips/${b.id}/publish`,
      );

      const active = await ctx.api('GET', '/api/v1/trips?status=active', { token: t.token });
      assert.deepEqual(
        active.json().data.map((trip: { id: string }) => trip.id),
        [a.id],
      );
      const unknown = await ctx.api('GET', '/api/v1/trips?status=bogus', { token: t.token });
      assert.equal(unknown.json().data.length, 2);
      const since = await ctx.api(
        'GET',
        `/api/v1/trips?publishedAt[gte]=${encodeURIComponent(published.data.publishedAt)}`,
        { token: t.token },
      );
      assert.deepEqual(
        since.json().data.map((trip: { id: string }) => trip.id),
        [b.id],
      );
      const bad = await ctx.api('GET', '/api/v1/trips?publishedAt[gte]=yesterday', {
        token: t.token,
      });
      assert.equal(bad.statusCode, 422);
      assert.ok(bad.json().errors['publishedAt[gte]']);
    });

    it('lets exactly one of several concurrent creates take the last quota slot', async () => {
      const t = await createTenant(ctx, { tier: 'starter' });
      await ctx.admin('PATCH', `/admin/v1/tenants/${t.id}`, { tripQuota: 3 });
      await createTrip(ctx, t);
      await createTrip(ctx, t);
      const responses = await Promise.all(
        Array.from({ length: 6 }, () =>
          ctx.api('POST', '/api/v1/trips', { token: t.token, body: tripBody(t) }),
        ),
      );
      const statuses = responses.map((r) => r.statusCode).sort();
      assert.deepEqual(statuses, [201, 403, 403, 403, 403, 403]);
      assert.equal(await ctx.runtime.repositories.trips.count(t.id), 3);
    });

    it('enforces the plan trip quota with 403 forbidden trip_quota_exceeded', async () => {
      const t = await createTenant(ctx, { tier: 'starter' });
      await ctx.admin('PATCH', `/admin/v1/tenants/${t.id}`, { tripQuota: 2 });
      await createTrip(ctx, t);
      await createTrip(ctx, t);
      const response = await ctx.api('POST', '/api/v1/trips', {
        token: t.token,
        body: tripBody(t),
      });
      assert.equal(response.statusCode, 403);
      assert.equal(response.json().type, 'http://api.test/errors/forbidden');
      assert.equal(response.json().code, 'trip_quota_exceeded');
      assert.equal(await ctx.runtime.repositories.trips.count(t.id), 2);
    });
  });
}
