import { publicObject } from '../../src/domain/change-events.ts';
import { sampleEventData } from '../../src/domain/event-samples.ts';
import type { SubscribableEventType } from '../../src/domain/states.ts';
import type { Runtime } from '../../src/runtime.ts';
import type { Client } from '../../src/services/clients-service.ts';
import type { TestContext } from './context.ts';

type Data<T> = { data: T };
type Row = Record<string, unknown> & { id: string };

export interface TenantFixture {
  id: string;
  slug: string;
  token: string;
  tokenId: string;
  ownerId: string;
  cityIds: string[];
}

let counter = 0;

/** A tenant with an owner, two cities and a token holding every scope. */
export async function createTenant(
  ctx: TestContext,
  options: { tier?: string; scopes?: string[] } = {},
): Promise<TenantFixture> {
  counter += 1;
  const slug = `t${counter}-${Math.random().toString(36).slice(2, 8)}`;
  const tenant = await ctx.admin<Data<Row>>('POST', '/admin/v1/tenants', {
    name: `Tenant ${slug}`,
    slug,
    tier: options.tier ?? 'pro',
  });
  const id = tenant.data.id;
  const owner = await ctx.admin<Data<Row>>('POST', `/admin/v1/tenants/${id}/members`, {
    email: `owner@${slug}.example`,
    role: 'owner',
  });
  const cityIds = [];
  for (const name of ['Lisbon', 'Porto']) {
    const city = await ctx.admin<Data<Row>>('POST', `/admin/v1/tenants/${id}/library/cities`, {
      name,
      countryIso: 'PT',
    });
    cityIds.push(city.data.id);
  }
  const minted = await mintToken(ctx, id, options.scopes ?? ['*'], owner.data.id);
  return { id, slug, token: minted.token, tokenId: minted.id, ownerId: owner.data.id, cityIds };
}

export async function mintToken(
  ctx: TestContext,
  tenantId: string,
  scopes: string[],
  createdBy?: string,
  expiresAt?: string,
): Promise<{ token: string; id: string }> {
  const minted = await ctx.admin<{ data: Row; token: string }>(
    'POST',
    `/admin/v1/tenants/${tenantId}/tokens`,
    {
      scopes,
      name: 'test',
      ...(createdBy ? { createdBy } : {}),
      ...(expiresAt ? { expiresAt } : {}),
    },
  );
  return { token: minted.token, id: minted.data.id };
}

export function tripBody(tenant: TenantFixture, overrides: Record<string, unknown> = {}) {
  return {
    title: 'Lisbon in spring',
    startDate: '2027-04-01',
    endDate: '2027-04-05',
    daysCount: 5,
    startCityId: tenant.cityIds[0],
    endCityId: tenant.cityIds[1],
    ...overrides,
  };
}

export async function createTrip(
  ctx: TestContext,
  tenant: TenantFixture,
  overrides: Record<string, unknown> = {},
) {
  const response = await ctx.api('POST', '/api/v1/trips', {
    token: tenant.token,
    body: tripBody(tenant, overrides),
  });
  if (response.statusCode !== 201) throw new Error(`trip not created: ${response.body}`);
  return response.json().data as Row;
}

/** A published trip with a confirmed-path booking in payment_pending and one payment. */
export async function createBooking(ctx: TestContext, tenant: TenantFixture) {
  const draft = await createTrip(ctx, tenant);
  const trip = (await ctx.admin<Data<Row>>('POST', `/admin/v1/trips/${draft.id}/publish`)).data;
  const booking = await ctx.admin<Data<Row>>('POST', '/admin/v1/bookings', {
    tripId: trip.id,
    totalRetailCents: 150_000,
    currency: 'EUR',
    travelerName: 'Ada Lovelace',
    travelerEmail: 'ada@example.com',
  });
  const payment = await ctx.admin<Data<Row>>(
    'POST',
    `/admin/v1/bookings/${booking.data.id}/payments`,
    {
      mode: 'deposit_only',
      label: 'Deposit',
      amountCents: 45_000,
      currency: 'EUR',
      kind: 'card',
    },
  );
  return { trip, booking: booking.data, payment: payment.data };
}

/**
 * A webhook subscription of `tenant` to `url`, to `client.created` unless `extra` says otherwise;
 * the answer's body (`data` and, shown once, `signingKey`).
 */
export async function createSubscription(
  ctx: TestContext,
  tenant: TenantFixture,
  url: string,
  extra: Record<string, unknown> = {},
) {
  const response = await ctx.api('POST', '/api/v1/webhooks', {
    token: tenant.token,
    body: { url, events: ['client.created'], ...extra },
  });
  if (response.statusCode !== 201) throw new Error(`subscription not created: ${response.body}`);
  return response.json() as { data: Row; signingKey: string };
}

export async function createClient(
  ctx: TestContext,
  tenant: TenantFixture,
  body: Record<string, unknown> = {},
) {
  const response = await ctx.api('POST', '/api/v1/clients', {
    token: tenant.token,
    body: { kind: 'individual', displayName: 'Grace Hopper', ...body },
  });
  if (response.statusCode !== 201) throw new Error(`client not created: ${response.body}`);
  return response.json().data as Row;
}

/** A `client.updated` event's data: `client` with these notes, and the notes as what changed. */
export function clientUpdated(client: Client, notes: string | null = null) {
  const object = { ...publicObject('client', client), notes };
  return {
    clientId: client.id,
    kind: client.kind,
    displayName: client.displayName,
    object,
    changes: { notes: { before: null, after: notes } },
  };
}

/**
 * `count` `client.updated` events about `clients` in turn, the nth with notes `note n`, recorded
 * in one transaction: a long history in seconds (no delivery is made for them).
 */
export async function recordClientUpdates(
  ctx: TestContext,
  tenantId: string,
  clients: readonly Client[],
  count: number,
): Promise<void> {
  const { events } = ctx.runtime.services;
  await ctx.runtime.database.withTransaction(async () => {
    for (let n = 0; n < count; n++) {
      const data = clientUpdated(clients[n % clients.length], `note ${n}`);
      await events.record(tenantId, 'client.updated', data as never);
    }
  });
}

/**
 * A sample event of `type` (its data as a test fire's, ids that name no row) emitted for the
 * tenant through the events service, in a transaction of its own: one delivery per subscription.
 */
export function emitSample(
  runtime: Pick<Runtime, 'database' | 'services'>,
  tenantId: string,
  type: SubscribableEventType,
  at?: Date,
): Promise<string> {
  return runtime.database.withTransaction(() =>
    runtime.services.events.emit(tenantId, type, sampleEventData(type, at)),
  );
}
