import { ADMIN_TOKEN, type Backend, createTestContext, type TestContext } from './context.ts';
import { createBooking, createClient, createTenant } from './fixtures.ts';
import { type Credentials, type OpenApiDocument, type Operation, operationsOf } from './fuzz.ts';
import { PortalClient, pathOf } from './portal-client.ts';

export interface FuzzTarget {
  ctx: TestContext;
  origin: string;
  operations: Operation[];
  credentials: Credentials;
  close(): Promise<void>;
}

/**
 * A real server on a loopback port over a fresh database, with a pro tenant owning a trip, a
 * booking, a payment, a client and a webhook subscription (to a loopback URL; no worker runs, so
 * nothing is ever sent), both OpenAPI documents as served, and a signed-in portal session.
 */
export async function startFuzzTarget(backend: Backend): Promise<FuzzTarget> {
  const ctx = await createTestContext(backend, { env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' } });
  try {
    const tenant = await createTenant(ctx, { tier: 'enterprise' });
    // The admin API may deactivate, downgrade or revoke: it gets a tenant of its own for that.
    const other = await createTenant(ctx);
    const { trip, booking, payment } = await createBooking(ctx, tenant);
    const client = await createClient(ctx, tenant);
    const hook = await ctx.api('POST', '/api/v1/webhooks', {
      token: tenant.token,
      body: { url: 'https://127.0.0.1:9/hook', events: ['client.created'] },
    });
    // A delivery for the portal's delivery pages (pending: no worker runs).
    await createClient(ctx, tenant, { displayName: 'Delivered' });
    const delivery = await ctx.api('GET', `/api/v1/webhooks/${hook.json().data.id}/deliveries`, {
      token: tenant.token,
    });
    const link = await ctx.api('POST', '/api/v1/portal/sessions', {
      token: tenant.token,
      body: {},
    });
    const portal = new PortalClient(ctx);
    await portal.signIn(pathOf(link.json().data.url));
    const csrf = await portal.csrf();
    await ctx.app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = ctx.app.server.address() as { port: number };
    const publicDoc = (
      await ctx.app.inject({ method: 'GET', url: '/v1/openapi.json' })
    ).json() as OpenApiDocument;
    const adminDoc = (
      await ctx.adminRequest('GET', '/admin/v1/openapi.json')
    ).json() as OpenApiDocument;
    return {
      ctx,
      origin: `http://127.0.0.1:${port}`,
      operations: [...operationsOf(publicDoc, 'public'), ...operationsOf(adminDoc, 'admin')],
      credentials: {
        token: tenant.token,
        adminToken: ADMIN_TOKEN,
        portal: {
          cookie: portal.cookieHeader(),
          csrf,
          subscriptionIds: [String(hook.json().data.id)],
          deliveryIds: (delivery.json().data as Array<{ id: string }>).map((d) => d.id),
        },
        ids: [
          tenant.id,
          tenant.tokenId,
          tenant.ownerId,
          ...tenant.cityIds,
          String(trip.id),
          String(booking.id),
          String(payment.id),
          String(client.id),
          String(hook.json().data.id),
        ],
        adminIds: [
          other.id,
          other.tokenId,
          other.ownerId,
          ...other.cityIds,
          String(trip.id),
          String(booking.id),
          String(payment.id),
          String(client.id),
          String(hook.json().data.id),
        ],
      },
      close: () => ctx.close(),
    };
  } catch (error) {
    await ctx.close();
    throw error;
  }
}
