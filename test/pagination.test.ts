import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { newId } from '../src/lib/ids.ts';
import { BACKENDS, createTestContext, type TestContext } from './helpers/context.ts';
import { createTenant, type TenantFixture } from './helpers/fixtures.ts';

/** Inserts trips straight through the repository: the walk, not the setup, is under test. */
async function insertTrips(
  ctx: TestContext,
  tenant: TenantFixture,
  count: number,
): Promise<string[]> {
  const ids: string[] = [];
  const now = new Date().toISOString();
  await ctx.runtime.database.withTransaction(async () => {
    for (let i = 0; i < count; i++) {
      const id = newId('trp');
      ids.push(id);
      await ctx.runtime.repositories.trips.insert({
        id,
        tenantId: tenant.id,
        tripNumber: `TR-${id.slice(-8)}`,
        title: `Trip ${i}`,
        status: i % 3 === 0 ? 'active' : 'draft',
        tripMode: 'tailor_made',
        dateMode: 'departure_based',
        publicSlug: null,
        publishedAt: null,
        unpublishedAt: null,
        startDate: null,
        endDate: null,
        daysCount: 3,
        startCityId: tenant.cityIds[0],
        endCityId: tenant.cityIds[1],
        transportMode: 'own_fleet',
        pricingDisplayMode: 'per_person',
        shortDescription: null,
        longDescription: null,
        clientId: null,
        notes: null,
        version: 1,
        createdBy: null,
        createdAt: now,
        updatedAt: now,
      });
    }
  });
  return ids;
}

for (const backend of BACKENDS) {
  describe(`cursor pagination (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let originals: string[];

    before(async () => {
      ctx = await createTestContext(backend);
      tenant = await createTenant(ctx, { tier: 'enterprise' });
      originals = await insertTrips(ctx, tenant, 1000);
    });
    after(() => ctx.close());

    it('walks 1,000 trips with limit=7 while trips are inserted, seeing each original exactly once', async () => {
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const url = `/api/v1/trips?limit=7${cursor ? `&cursor=${cursor}` : ''}`;
        const response = await ctx.api('GET', url, { token: tenant.token });
        assert.equal(response.statusCode, 200);
        const page = response.json() as {
          data: Array<{ id: string }>;
          meta: { cursor: string | null; hasMore: boolean };
        };
        assert.ok(page.data.length <= 7);
        seen.push(...page.data.map((trip) => trip.id));
        assert.equal(page.meta.hasMore, page.meta.cursor !== null);
        cursor = page.meta.cursor;
        pages += 1;
        // Concurrent writers: new trips land after every page (and so after the cursor).
        if (pages % 10 === 0 && pages < 140) {
          const response = await ctx.api('POST', '/api/v1/trips', {
            token: tenant.token,
            body: {
              title: `Inserted during walk ${pages}`,
              startDate: '2027-01-01',
              daysCount: 2,
              startCityId: tenant.cityIds[0],
              endCityId: tenant.cityIds[0],
            },
          });
          assert.equal(response.statusCode, 201);
        }
      } while (cursor);

      const counts = new Map<string, number>();
      for (const id of seen) counts.set(id, (counts.get(id) ?? 0) + 1);
      for (const id of originals)
        assert.equal(counts.get(id), 1, `trip ${id} seen ${counts.get(id) ?? 0} times`);
      assert.ok(
        [...counts.values()].every((n) => n === 1),
        'no row repeated',
      );
      assert.deepEqual(seen, [...seen].sort(), 'ids ascend across pages');
      assert.ok(pages >= Math.ceil(1000 / 7));
    });

    it('keeps filters across pages', async () => {
      const active: string[] = [];
      let cursor: string | null = null;
      do {
        const response = await ctx.api(
          'GET',
          `/api/v1/trips?status=active&limit=100${cursor ? `&cursor=${cursor}` : ''}`,
          {
            token: tenant.token,
          },
        );
        const page = response.json() as {
          data: Array<{ id: string; status: string }>;
          meta: { cursor: string | null };
        };
        assert.ok(page.data.every((trip) => trip.status === 'active'));
        active.push(...page.data.map((trip) => trip.id));
        cursor = page.meta.cursor;
      } while (cursor);
      assert.deepEqual(
        active,
        originals.filter((_, i) => i % 3 === 0),
      );
    });

    it('ends with hasMore false and a null cursor on an exact last page', async () => {
      const t = await createTenant(ctx);
      await insertTrips(ctx, t, 4);
      const first = (await ctx.api('GET', '/api/v1/trips?limit=2', { token: t.token })).json();
      assert.equal(first.meta.hasMore, true);
      const second = (
        await ctx.api('GET', `/api/v1/trips?limit=2&cursor=${first.meta.cursor}`, {
          token: t.token,
        })
      ).json();
      assert.equal(second.data.length, 2);
      assert.deepEqual(second.meta, { cursor: null, hasMore: false });
      const empty = (
        await ctx.api('GET', '/api/v1/trips', { token: (await createTenant(ctx)).token })
      ).json();
      assert.deepEqual(empty, { data: [], meta: { cursor: null, hasMore: false } });
    });
  });
}
