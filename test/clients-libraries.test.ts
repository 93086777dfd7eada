import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BACKENDS, createTestContext, type TestContext } from './helpers/context.ts';
import { createClient, createTenant, type TenantFixture } from './helpers/fixtures.ts';

const CLIENT_FIELDS = [
  'id',
  'kind',
  'displayName',
  'legalName',
  'email',
  'phone',
  'countryIso',
  'language',
  'currency',
  'vatId',
  'tags',
  'notes',
  'archivedAt',
  'createdAt',
  'updatedAt',
].sort();

type Row = Record<string, unknown> & { id: string };

for (const backend of BACKENDS) {
  describe(`clients and library catalogs (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;

    before(async () => {
      ctx = await createTestContext(backend);
      tenant = await createTenant(ctx);
    });
    after(() => ctx.close());

    it('creates a client with every field and emits client.created in the same transaction', async () => {
      const response = await ctx.api('POST', '/api/v1/clients', {
        token: tenant.token,
        body: {
          kind: 'company',
          displayName: 'Nordic Incentives',
          legalName: 'Nordic Incentives AB',
          email: 'events@nordic.example',
          phone: '+46 8 000 000',
          countryIso: 'se',
          language: 'sv-SE',
          currency: 'sek',
          vatId: 'SE556000000001',
          notes: 'Pays on time.',
          tags: ['corporate', 'incentive'],
        },
      });
      assert.equal(response.statusCode, 201);
      const client = response.json().data;
      assert.deepEqual(Object.keys(client).sort(), CLIENT_FIELDS);
      assert.match(client.id, /^cli_[0-9A-Z]{26}$/);
      assert.equal(client.countryIso, 'SE');
      assert.equal(client.currency, 'SEK');
      assert.deepEqual(client.tags, ['corporate', 'incentive']);
      assert.equal(client.archivedAt, null);
      const events = await ctx.runtime.repositories.events.listForTenant(tenant.id);
      const created = events
        .filter((e) => e.type === 'client.created')
        .map((e) => JSON.parse(e.data));
      assert.deepEqual(created.at(-1), {
        clientId: client.id,
        kind: 'company',
        displayName: 'Nordic Incentives',
        object: client,
        changes: {},
      });

      const minimal = await createClient(ctx, tenant, { displayName: 'Solo' });
      assert.deepEqual(minimal.tags, []);
      assert.equal(minimal.email, null);
    });

    it('validates client fields precisely', async () => {
      const response = await ctx.api('POST', '/api/v1/clients', {
        token: tenant.token,
        body: {
          kind: 'robot',
          displayName: '',
          email: 'not-an-email',
          countryIso: 'SWE',
          currency: 'EU',
          tags: Array.from({ length: 21 }, (_, i) => `t${i}`),
        },
      });
      assert.equal(response.statusCode, 422);
      assert.deepEqual(Object.keys(response.json().errors).sort(), [
        'countryIso',
        'currency',
        'displayName',
        'email',
        'kind',
        'tags',
      ]);
    });

    it('lists clients with kind and archived filters; archive and unarchive via admin', async () => {
      const t = await createTenant(ctx);
      const a = await createClient(ctx, t, { kind: 'individual' });
      const b = await createClient(ctx, t, { kind: 'company', displayName: 'B' });
      const archived = (await ctx.admin<{ data: Row }>('POST', `/admin/v1/clients/${a.id}/archive`))
        .data;
      assert.ok(archived.archivedAt);
      const ids = async (query: string) =>
        (await ctx.api('GET', `/api/v1/clients${query}`, { token: t.token }))
          .json()
          .data.map((c: Row) => c.id);
      assert.deepEqual(await ids(''), [a.id, b.id]);
      assert.deepEqual(await ids('?archived=true'), [a.id]);
      assert.deepEqual(await ids('?archived=false'), [b.id]);
      assert.deepEqual(await ids('?kind=company'), [b.id]);
      assert.deepEqual(await ids('?kind=alien'), [a.id, b.id], 'unknown kind is ignored');
      const bad = await ctx.api('GET', '/api/v1/clients?archived=yes', { token: t.token });
      assert.equal(bad.statusCode, 422);
      assert.ok(bad.json().errors.archived);
      const restored = (
        await ctx.admin<{ data: Row }>('POST', `/admin/v1/clients/${a.id}/unarchive`)
      ).data;
      assert.equal(restored.archivedAt, null);
      assert.deepEqual(await ids('?archived=true'), []);
      // Archiving and unarchiving are announced, each with the client and what moved; a second
      // unarchive changes nothing and announces nothing.
      await ctx.admin('POST', `/admin/v1/clients/${a.id}/unarchive`);
      const updates = (await ctx.runtime.repositories.events.listForTenant(t.id))
        .filter((e) => e.type === 'client.updated')
        .map((e) => JSON.parse(e.data));
      assert.deepEqual(
        updates.map((u) => u.changes.archivedAt),
        [
          { before: null, after: archived.archivedAt },
          { before: archived.archivedAt, after: null },
        ],
      );
      assert.deepEqual(updates[1].object, restored);
    });

    it('serves the five catalogs with their fields, cityId and q filters', async () => {
      const t = await createTenant(ctx);
      const [lisbon, porto] = t.cityIds;
      const add = (kind: string, body: object) =>
        ctx.admin<{ data: Row }>('POST', `/admin/v1/tenants/${t.id}/library/${kind}`, body);
      const h1 = (
        await add('hotels', { name: 'Casa do Rio', cityId: lisbon, stars: 4, address: 'Rua 1' })
      ).data;
      const h2 = (await add('hotels', { name: 'Ribeira 100%_Inn', cityId: porto })).data;
      await add('activities', { name: 'Fado night', cityId: lisbon, durationMinutes: 120 });
      await add('vehicles', { name: 'Sprinter', kind: 'minibus', seats: 16 });
      const guide = (await add('guides', { name: 'Inês', languages: ['pt', 'en'] })).data;
      assert.deepEqual(guide.languages, ['pt', 'en']);

      const get = async (url: string) => (await ctx.api('GET', url, { token: t.token })).json();
      const hotels = await get('/api/v1/libraries/hotels');
      assert.deepEqual(
        hotels.data.map((h: Row) => h.id),
        [h1.id, h2.id],
      );
      assert.deepEqual(Object.keys(hotels.data[0]).sort(), [
        'address',
        'cityId',
        'createdAt',
        'id',
        'name',
        'stars',
        'updatedAt',
      ]);
      assert.equal(hotels.data[1].stars, null);
      assert.deepEqual(
        (await get(`/api/v1/libraries/hotels?cityId=${porto}`)).data.map((h: Row) => h.id),
        [h2.id],
      );
      assert.deepEqual(
        (await get('/api/v1/libraries/hotels?q=RIO')).data.map((h: Row) => h.id),
        [h1.id],
      );
      assert.deepEqual(
        (await get('/api/v1/libraries/hotels?q=100%25_')).data.map((h: Row) => h.id),
        [h2.id],
        'wildcards are literal',
      );
      assert.deepEqual(
        (await get('/api/v1/libraries/hotels?q=%25')).data.map((h: Row) => h.id),
        [h2.id],
      );
      assert.equal((await get('/api/v1/libraries/cities')).data.length, 2);
      assert.deepEqual(Object.keys((await get('/api/v1/libraries/guides')).data[0]).sort(), [
        'createdAt',
        'email',
        'id',
        'languages',
        'name',
        'phone',
        'updatedAt',
      ]);
      assert.equal((await get('/api/v1/libraries/vehicles')).data[0].seats, 16);
      assert.equal((await get('/api/v1/libraries/activities')).data[0].durationMinutes, 120);
      const noCityFilter = await ctx.api('GET', `/api/v1/libraries/vehicles?cityId=${lisbon}`, {
        token: t.token,
      });
      assert.equal(noCityFilter.statusCode, 422, 'vehicles have no city');

      const page = await get('/api/v1/libraries/cities?limit=1');
      assert.equal(page.meta.hasMore, true);
      const next = await get(`/api/v1/libraries/cities?limit=1&cursor=${page.meta.cursor}`);
      assert.equal(next.data[0].id, porto);
      const crossed = await ctx.api('GET', `/api/v1/libraries/hotels?cursor=${page.meta.cursor}`, {
        token: t.token,
      });
      assert.equal(crossed.statusCode, 422, 'a cities cursor is not a hotels cursor');
    });

    it('rejects a hotel in a city of another tenant', async () => {
      const other = await createTenant(ctx);
      const response = await ctx.adminRequest(
        'POST',
        `/admin/v1/tenants/${tenant.id}/library/hotels`,
        { name: 'Elsewhere', cityId: other.cityIds[0] },
      );
      assert.equal(response.statusCode, 422);
      assert.ok(response.json().errors.cityId);
    });
  });
}
