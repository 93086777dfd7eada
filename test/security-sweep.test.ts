import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BACKENDS, createTestContext, type TestContext } from './helpers/context.ts';
import {
  createBooking,
  createClient,
  createTenant,
  mintToken,
  type TenantFixture,
  tripBody,
} from './helpers/fixtures.ts';

interface Ids {
  trip: string;
  publishedTrip: string;
  booking: string;
  client: string;
  webhook: string;
  deletableWebhook: string;
  delivery: string;
  /** The client's `client.created`. */
  event: string;
  erasure: string;
}

/** Nothing listens there and no worker runs in this suite: no delivery is ever attempted. */
const HOOK_URL = 'https://127.0.0.1:9/hook';

interface RouteCase {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** OpenAPI path template, to check the table covers the document. */
  template: string;
  url: (ids: Ids) => string;
  scope: string | null;
  body?: (tenant: TenantFixture, ids: Ids) => unknown;
  /** What the owner gets, and what another tenant gets when using the owner's ids. */
  ownerStatus: number;
  foreignStatus: number;
}

/** Every route of the public API. A route added to the API but not here fails the coverage test. */
const ROUTES: RouteCase[] = [
  {
    method: 'GET',
    template: '/api/v1/me',
    url: () => '/api/v1/me',
    scope: null,
    ownerStatus: 200,
    foreignStatus: 200,
  },
  {
    method: 'GET',
    template: '/api/v1/event-types',
    url: () => '/api/v1/event-types',
    scope: null,
    ownerStatus: 200,
    foreignStatus: 200,
  },
  {
    method: 'GET',
    template: '/api/v1/events/{id}',
    url: (i) => `/api/v1/events/${i.event}`,
    // The read scope of the event's resource: a client's.
    scope: 'clients:read',
    ownerStatus: 200,
    foreignStatus: 404,
  },
  {
    method: 'POST',
    template: '/api/v1/erasures',
    url: () => '/api/v1/erasures',
    scope: 'clients:write',
    body: (_t, i) => ({ clientId: i.client }),
    ownerStatus: 202,
    foreignStatus: 404,
  },
  {
    method: 'GET',
    template: '/api/v1/erasures/{id}',
    url: (i) => `/api/v1/erasures/${i.erasure}`,
    scope: 'clients:read',
    ownerStatus: 200,
    foreignStatus: 404,
  },
  {
    method: 'GET',
    template: '/api/v1/trips',
    url: () => '/api/v1/trips',
    scope: 'trips:read',
    ownerStatus: 200,
    foreignStatus: 200,
  },
  {
    method: 'POST',
    template: '/api/v1/trips',
    url: () => '/api/v1/trips',
    scope: 'trips:write',
    body: (t) => tripBody(t),
    ownerStatus: 201,
    foreignStatus: 201,
  },
  {
    method: 'GET',
    template: '/api/v1/trips/{id}',
    url: (i) => `/api/v1/trips/${i.trip}`,
    scope: 'trips:read',
    ownerStatus: 200,
    foreignStatus: 404,
  },
  {
    method: 'PATCH',
    template: '/api/v1/trips/{id}',
    url: (i) => `/api/v1/trips/${i.trip}`,
    scope: 'trips:write',
    body: () => ({ title: 'Renamed' }),
    ownerStatus: 200,
    foreignStatus: 404,
  },
  {
    method: 'GET',
    template: '/api/v1/bookings',
    url: () => '/api/v1/bookings',
    scope: 'bookings:read',
    ownerStatus: 200,
    foreignStatus: 200,
  },
  {
    method: 'POST',
    template: '/api/v1/bookings',
    url: () => '/api/v1/bookings',
    scope: 'bookings:write',
    body: (_t, i) => ({
      tripId: i.publishedTrip,
      travelerName: 'Ada',
      travelerEmail: 'ada@example.com',
    }),
    ownerStatus: 501,
    foreignStatus: 404,
  },
  {
    method: 'GET',
    template: '/api/v1/bookings/{id}',
    url: (i) => `/api/v1/bookings/${i.booking}`,
    scope: 'bookings:read',
    ownerStatus: 200,
    foreignStatus: 404,
  },
  {
    method: 'GET',
    template: '/api/v1/clients',
    url: () => '/api/v1/clients',
    scope: 'clients:read',
    ownerStatus: 200,
    foreignStatus: 200,
  },
  {
    method: 'POST',
    template: '/api/v1/clients',
    url: () => '/api/v1/clients',
    scope: 'clients:write',
    body: () => ({ kind: 'company', displayName: 'Acme' }),
    ownerStatus: 201,
    foreignStatus: 201,
  },
  {
    method: 'GET',
    template: '/api/v1/clients/{id}',
    url: (i) => `/api/v1/clients/${i.client}`,
    scope: 'clients:read',
    ownerStatus: 200,
    foreignStatus: 404,
  },
  {
    method: 'GET',
    template: '/api/v1/payments',
    url: () => '/api/v1/payments',
    scope: 'payments:read',
    ownerStatus: 200,
    foreignStatus: 200,
  },
  ...(['cities', 'hotels', 'activities', 'vehicles', 'guides'] as const).map(
    (kind): RouteCase => ({
      method: 'GET',
      template: `/api/v1/libraries/${kind}`,
      url: () => `/api/v1/libraries/${kind}`,
      scope: 'libraries:read',
      ownerStatus: 200,
      foreignStatus: 200,
    }),
  ),
  {
    method: 'GET',
    template: '/api/v1/webhooks',
    url: () => '/api/v1/webhooks',
    scope: 'webhooks:read',
    ownerStatus: 200,
    foreignStatus: 200,
  },
  {
    method: 'POST',
    template: '/api/v1/webhooks',
    url: () => '/api/v1/webhooks',
    scope: 'webhooks:write',
    body: () => ({ url: HOOK_URL, events: ['trip.published'] }),
    ownerStatus: 201,
    foreignStatus: 201,
  },
  {
    method: 'GET',
    template: '/api/v1/webhooks/{id}',
    url: (i) => `/api/v1/webhooks/${i.webhook}`,
    scope: 'webhooks:read',
    ownerStatus: 200,
    foreignStatus: 404,
  },
  {
    method: 'DELETE',
    template: '/api/v1/webhooks/{id}',
    url: (i) => `/api/v1/webhooks/${i.deletableWebhook}`,
    scope: 'webhooks:write',
    ownerStatus: 204,
    foreignStatus: 404,
  },
  {
    method: 'PATCH',
    template: '/api/v1/webhooks/{id}',
    url: (i) => `/api/v1/webhooks/${i.webhook}`,
    scope: 'webhooks:write',
    body: () => ({ events: ['trip.published', 'client.created'] }),
    ownerStatus: 200,
    foreignStatus: 404,
  },
  {
    method: 'GET',
    template: '/api/v1/webhooks/{id}/events',
    url: (i) => `/api/v1/webhooks/${i.webhook}/events`,
    scope: 'webhooks:read',
    ownerStatus: 200,
    foreignStatus: 404,
  },
  {
    method: 'POST',
    template: '/api/v1/webhooks/{id}/rotate-key',
    url: (i) => `/api/v1/webhooks/${i.webhook}/rotate-key`,
    scope: 'webhooks:write',
    ownerStatus: 200,
    foreignStatus: 404,
  },
  {
    method: 'GET',
    template: '/api/v1/webhooks/{id}/deliveries',
    url: (i) => `/api/v1/webhooks/${i.webhook}/deliveries`,
    scope: 'webhooks:read',
    ownerStatus: 200,
    foreignStatus: 404,
  },
  {
    method: 'GET',
    template: '/api/v1/webhooks/{id}/deliveries/{deliveryId}/attempts',
    url: (i) => `/api/v1/webhooks/${i.webhook}/deliveries/${i.delivery}/attempts`,
    scope: 'webhooks:read',
    ownerStatus: 200,
    foreignStatus: 404,
  },
  {
    method: 'POST',
    template: '/api/v1/webhooks/{id}/deliveries/{deliveryId}/redeliver',
    url: (i) => `/api/v1/webhooks/${i.webhook}/deliveries/${i.delivery}/redeliver`,
    scope: 'webhooks:write',
    ownerStatus: 202,
    foreignStatus: 404,
  },
  {
    method: 'POST',
    template: '/api/v1/webhooks/{id}/recover',
    url: (i) => `/api/v1/webhooks/${i.webhook}/recover`,
    body: () => ({ since: '2026-01-01T00:00:00Z' }),
    scope: 'webhooks:write',
    ownerStatus: 202,
    foreignStatus: 404,
  },
  {
    method: 'POST',
    template: '/api/v1/portal/sessions',
    url: () => '/api/v1/portal/sessions',
    body: () => ({ readOnly: true }),
    scope: 'webhooks:write',
    // A link to the caller's own portal: another tenant gets one of its own.
    ownerStatus: 201,
    foreignStatus: 201,
  },
  {
    method: 'POST',
    template: '/api/v1/webhooks/filters/test',
    url: () => '/api/v1/webhooks/filters/test',
    body: (_tenant, i) => ({ filter: { 'data.kind': 'company' }, subscriptionId: i.webhook }),
    scope: 'webhooks:read',
    // A dry run on the owner's ledger: another tenant's id is not found.
    ownerStatus: 200,
    foreignStatus: 404,
  },
  {
    method: 'POST',
    template: '/api/v1/webhooks/transformations/test',
    url: () => '/api/v1/webhooks/transformations/test',
    body: (_tenant, i) => ({
      code: 'function handler(webhook) { return webhook; }',
      subscriptionId: i.webhook,
    }),
    scope: 'webhooks:read',
    // A dry run on the owner's ledger: another tenant's id is not found.
    ownerStatus: 200,
    foreignStatus: 404,
  },
  {
    method: 'POST',
    template: '/api/v1/webhooks/test',
    url: () => '/api/v1/webhooks/test',
    scope: 'webhooks:write',
    ownerStatus: 200,
    foreignStatus: 200,
  },
];

for (const backend of BACKENDS) {
  describe(`security sweep over every route (${backend})`, () => {
    let ctx: TestContext;
    let owner: TenantFixture;
    let foreign: TenantFixture;
    let ids: Ids;
    const tokens: Record<string, string> = {};

    before(async () => {
      ctx = await createTestContext(backend, { env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' } });
      owner = await createTenant(ctx);
      foreign = await createTenant(ctx);
      const { trip, booking } = await createBooking(ctx, owner);
      const draft = await ctx.api('POST', '/api/v1/trips', {
        token: owner.token,
        body: tripBody(owner),
      });
      const client = await createClient(ctx, owner);
      const subscribe = async () =>
        (
          await ctx.api('POST', '/api/v1/webhooks', {
            token: owner.token,
            body: { url: HOOK_URL, events: ['trip.published'] },
          })
        ).json().data.id as string;
      const webhook = await subscribe();
      await ctx.api('POST', '/api/v1/webhooks/test', {
        token: owner.token,
        body: { subscriptionId: webhook },
      });
      const deliveries = await ctx.api('GET', `/api/v1/webhooks/${webhook}/deliveries`, {
        token: owner.token,
      });
      ids = {
        trip: draft.json().data.id,
        publishedTrip: trip.id,
        booking: booking.id,
        client: client.id,
        webhook,
        deletableWebhook: await subscribe(),
        delivery: deliveries.json().data[0].id,
        event: (
          await ctx.runtime.database.db
            .selectFrom('events')
            .select('id')
            .where('tenantId', '=', owner.id)
            .where('type', '=', 'client.created')
            .executeTakeFirstOrThrow()
        ).id,
        // No worker runs here: the erasure stays pending, the client as it is.
        erasure: (
          await ctx.api('POST', '/api/v1/erasures', {
            token: owner.token,
            body: { email: 'nobody@example.test' },
          })
        ).json().data.id,
      };

      const revoked = await mintToken(ctx, owner.id, ['*']);
      await ctx.admin('POST', `/admin/v1/tokens/${revoked.id}/revoke`);
      tokens.revoked = revoked.token;
      // Minted for a minute, then expired in its row: a past expiresAt is refused at minting.
      const expired = await mintToken(
        ctx,
        owner.id,
        ['*'],
        undefined,
        new Date(Date.now() + 60_000).toISOString(),
      );
      await ctx.runtime.database.db
        .updateTable('apiTokens')
        .set({ expiresAt: '2020-01-01T00:00:00.000Z' })
        .where('id', '=', expired.id)
        .execute();
      tokens.expired = expired.token;
      tokens.free = (await createTenant(ctx, { tier: 'free' })).token;
    });
    after(() => ctx.close());

    it('covers every operation of the OpenAPI document', async () => {
      const document = (await ctx.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
      const documented = Object.entries(document.paths as Record<string, object>).flatMap(
        ([path, methods]) =>
          Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`),
      );
      const swept = ROUTES.map((route) => `${route.method} ${route.template}`);
      assert.deepEqual([...swept].sort(), [...documented].sort());
    });

    const send = (
      route: RouteCase,
      headers: Record<string, string>,
      tenant: TenantFixture = owner,
    ) =>
      ctx.api(route.method, route.url(ids), {
        headers,
        ...(route.body ? { body: route.body(tenant, ids) } : {}),
      });

    for (const route of ROUTES) {
      const name = `${route.method} ${route.template}`;

      it(`${name}: 401 for missing, malformed, unknown, revoked and expired tokens`, async () => {
        const cases: Array<[string, Record<string, string>]> = [
          ['missing', {}],
          ['malformed', { authorization: 'Bearer not-a-token' }],
          ['unknown', { authorization: 'Bearer tk_test_0000000000000000000000000Z' }],
          ['revoked', { authorization: `Bearer ${tokens.revoked}` }],
          ['expired', { authorization: `Bearer ${tokens.expired}` }],
        ];
        for (const [what, headers] of cases) {
          const response = await send(route, headers);
          assert.equal(response.statusCode, 401, `${name} with a ${what} token`);
          assert.equal(response.headers['www-authenticate'], 'Bearer');
          assert.match(response.json().detail, new RegExp(what));
        }
      });

      it(`${name}: 403 plan-required for a tenant without API access`, async () => {
        const response = await send(route, { authorization: `Bearer ${tokens.free}` });
        assert.equal(response.statusCode, 403);
        assert.equal(response.json().type, 'http://api.test/errors/plan-required');
      });

      if (route.scope) {
        it(`${name}: 403 scope-required without ${route.scope}`, async () => {
          const others = await mintToken(
            ctx,
            owner.id,
            ['libraries:read', 'trips:read'].filter((s) => s !== route.scope).slice(0, 1),
          );
          const response = await send(route, { authorization: `Bearer ${others.token}` });
          assert.equal(response.statusCode, 403);
          assert.equal(response.json().type, 'http://api.test/errors/scope-required');
          assert.equal(response.json().required_scope, route.scope);
        });
      }

      it(`${name}: ${route.ownerStatus} for the owner, ${route.foreignStatus} for another tenant`, async () => {
        const own = await send(route, { authorization: `Bearer ${owner.token}` });
        assert.equal(own.statusCode, route.ownerStatus, own.body);
        const other = await send(route, { authorization: `Bearer ${foreign.token}` }, foreign);
        assert.equal(other.statusCode, route.foreignStatus, other.body);
        if (route.method === 'GET' && other.statusCode === 200) {
          // Lists seen by another tenant never contain the owner's rows.
          const leaked = JSON.stringify(other.json());
          for (const id of Object.values(ids))
            assert.ok(!leaked.includes(id), `${name} leaked ${id}`);
        }
      });
    }

    it("filters naming another tenant's ids find nothing", async () => {
      for (const url of [
        `/api/v1/bookings?tripId=${ids.publishedTrip}`,
        `/api/v1/payments?bookingId=${ids.booking}`,
      ]) {
        const response = await ctx.api('GET', url, { token: foreign.token });
        assert.equal(response.statusCode, 200);
        assert.deepEqual(response.json().data, []);
      }
    });
  });
}
