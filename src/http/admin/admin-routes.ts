import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { SCOPES, TIER_NAMES } from '../../domain/plans.ts';
import {
  BOOKING_STATUSES,
  MEMBER_ROLES,
  PAYMENT_MODES,
  PAYMENT_STATUSES,
  TRIP_STATUSES,
} from '../../domain/states.ts';
import {
  TENANT_NAME_MAX_LENGTH,
  TENANT_SLUG_PATTERN,
  TENANT_SLUG_RULE,
} from '../../domain/tenants.ts';
import { fieldError, notFound } from '../../lib/problems.ts';
import { LIBRARY_KINDS, type LibraryKind } from '../../repositories/library-repository.ts';
import type { Services } from '../../services/index.ts';
import { CreateClientBody } from '../routes/clients-routes.ts';
import {
  Booking,
  Client,
  DataOf,
  DateTime,
  Email,
  IdParams,
  LibraryItems,
  Nullable,
  NullableDateTime,
  NullableString,
  Payment,
  problems,
  StringEnum,
  Trip,
  WebhookSubscription,
} from '../schemas.ts';

const Tenant = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    slug: Type.String(),
    tier: StringEnum(TIER_NAMES),
    active: Type.Boolean(),
    tripQuota: Nullable(Type.Integer({ description: 'null: unlimited.' })),
    webhookEndpointCap: Type.Integer(),
  },
  { additionalProperties: false },
);

const Member = Type.Object(
  { id: Type.String(), email: Type.String(), role: StringEnum(MEMBER_ROLES) },
  { additionalProperties: false },
);

const TokenObject = Type.Object(
  {
    id: Type.String(),
    name: NullableString,
    prefix: Type.String(),
    scopes: Type.Array(Type.String()),
    lastUsedAt: NullableDateTime,
    expiresAt: NullableDateTime,
    createdAt: DateTime,
    revoked: Type.Boolean(),
  },
  { additionalProperties: false },
);

const Notification = Type.Object(
  {
    id: Type.String(),
    recipient: Type.String(),
    memberId: NullableString,
    kind: Type.String(),
    subscriptionId: NullableString,
    createdAt: DateTime,
  },
  { additionalProperties: false },
);

const LIBRARY_BODIES = {
  cities: Type.Object(
    {
      name: Type.String({ minLength: 1, maxLength: 200 }),
      countryIso: Type.Optional(Type.String({ format: 'country-code', pattern: '^[A-Z]{2}$' })),
    },
    { additionalProperties: false },
  ),
  hotels: Type.Object(
    {
      name: Type.String({ minLength: 1, maxLength: 200 }),
      cityId: Type.Optional(Type.String()),
      stars: Type.Optional(Type.Integer({ minimum: 1, maximum: 5 })),
      address: Type.Optional(Type.String({ maxLength: 500 })),
    },
    { additionalProperties: false },
  ),
  activities: Type.Object(
    {
      name: Type.String({ minLength: 1, maxLength: 200 }),
      cityId: Type.Optional(Type.String()),
      durationMinutes: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000 })),
      description: Type.Optional(Type.String({ maxLength: 8000 })),
    },
    { additionalProperties: false },
  ),
  vehicles: Type.Object(
    {
      name: Type.String({ minLength: 1, maxLength: 200 }),
      kind: Type.Optional(Type.String({ maxLength: 40 })),
      seats: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    },
    { additionalProperties: false },
  ),
  guides: Type.Object(
    {
      name: Type.String({ minLength: 1, maxLength: 200 }),
      languages: Type.Optional(Type.Array(Type.String({ maxLength: 20 }), { maxItems: 50 })),
      email: Type.Optional(Email),
      phone: Type.Optional(Type.String({ maxLength: 40 })),
    },
    { additionalProperties: false },
  ),
} satisfies Record<LibraryKind, unknown>;

const Money = Type.Integer({ minimum: 0, maximum: 2_000_000_000 });
const Currency = Type.String({ format: 'currency-code', pattern: '^[A-Z]{3}$' });
const Transition = <T extends readonly string[]>(values: T) =>
  Type.Object({ to: StringEnum(values) }, { additionalProperties: false });

/** Admin routes address resources by id alone; the owning tenant is looked up first. */
async function tenantOf(
  owned: { findTenantOf(id: string): Promise<string | undefined> },
  id: string,
  what: string,
) {
  const tenantId = await owned.findTenantOf(id);
  if (!tenantId) throw notFound(what);
  return tenantId;
}

export const adminRoutes: FastifyPluginAsyncTypebox<{ services: Services }> = async (
  app,
  { services },
) => {
  const repos = services.repositories;
  const common = problems(401, 404, 409, 422);

  app.post(
    '/tenants',
    {
      schema: {
        operationId: 'adminCreateTenant',
        body: Type.Object(
          {
            name: Type.String({ minLength: 1, maxLength: TENANT_NAME_MAX_LENGTH }),
            slug: Type.String({
              pattern: TENANT_SLUG_PATTERN.source,
              description: TENANT_SLUG_RULE,
            }),
            tier: StringEnum(TIER_NAMES),
          },
          { additionalProperties: false },
        ),
        response: { 201: DataOf(Tenant), ...common },
      },
    },
    async (request, reply) =>
      reply.code(201).send({ data: await services.tenants.create(request.body) }),
  );

  app.get(
    '/tenants/:id',
    {
      schema: {
        operationId: 'adminGetTenant',
        params: IdParams,
        response: { 200: DataOf(Tenant), ...common },
      },
    },
    async (request) => ({ data: await services.tenants.get(request.params.id) }),
  );

  app.patch(
    '/tenants/:id',
    {
      schema: {
        operationId: 'adminUpdateTenant',
        params: IdParams,
        body: Type.Object(
          {
            name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
            tier: Type.Optional(StringEnum(TIER_NAMES)),
            active: Type.Optional(Type.Boolean()),
            // Bounded like every integer: the columns are 32-bit, and JSON's 1e309 is Infinity.
            tripQuota: Type.Optional(
              Nullable(
                Type.Integer({
                  minimum: 0,
                  maximum: 10_000_000,
                  description: 'null: the plan default.',
                }),
              ),
            ),
            webhookEndpointCap: Type.Optional(
              Nullable(
                Type.Integer({
                  minimum: 0,
                  maximum: 100_000,
                  description: 'null: the plan default.',
                }),
              ),
            ),
          },
          { additionalProperties: false },
        ),
        response: { 200: DataOf(Tenant), ...common },
      },
    },
    async (request) => ({ data: await services.tenants.update(request.params.id, request.body) }),
  );

  app.post(
    '/tenants/:id/members',
    {
      schema: {
        operationId: 'adminAddMember',
        params: IdParams,
        body: Type.Object(
          { email: Email, role: StringEnum(MEMBER_ROLES) },
          { additionalProperties: false },
        ),
        response: { 201: DataOf(Member), ...common },
      },
    },
    async (request, reply) =>
      reply
        .code(201)
        .send({ data: await services.tenants.addMember(request.params.id, request.body) }),
  );

  app.get(
    '/tenants/:id/notifications',
    {
      schema: {
        operationId: 'adminListNotifications',
        params: IdParams,
        response: { 200: DataOf(Type.Array(Notification)), ...common },
      },
    },
    async (request) => ({ data: await services.tenants.listNotifications(request.params.id) }),
  );

  app.post(
    '/tenants/:id/tokens',
    {
      schema: {
        operationId: 'adminCreateToken',
        params: IdParams,
        body: Type.Object(
          {
            scopes: Type.Array(StringEnum([...SCOPES, '*']), { minItems: 1 }),
            name: Type.Optional(Nullable(Type.String({ maxLength: 200 }))),
            expiresAt: Type.Optional(Nullable(DateTime)),
            createdBy: Type.Optional(Nullable(Type.String())),
          },
          { additionalProperties: false },
        ),
        response: {
          201: Type.Object(
            { data: TokenObject, token: Type.String({ description: 'Shown only here.' }) },
            { additionalProperties: false },
          ),
          ...common,
        },
      },
    },
    async (request, reply) => {
      const tenant = await services.tenants.get(request.params.id);
      const { token, value } = await services.tokens.mint(tenant.id, request.body);
      return reply.code(201).send({ data: token, token: value });
    },
  );

  app.post(
    '/tokens/:id/revoke',
    {
      schema: {
        operationId: 'adminRevokeToken',
        params: IdParams,
        response: { 200: DataOf(TokenObject), ...common },
      },
    },
    async (request) => ({ data: await services.tokens.revoke(request.params.id) }),
  );

  for (const kind of LIBRARY_KINDS) {
    app.post(
      `/tenants/:id/library/${kind}`,
      {
        schema: {
          operationId: `adminCreate_${kind}`,
          params: IdParams,
          body: LIBRARY_BODIES[kind],
          response: { 201: DataOf(Type.Ref(LibraryItems[kind])), ...common },
        },
      },
      async (request, reply) => {
        const tenant = await services.tenants.get(request.params.id);
        const item = await services.library.create(
          kind,
          tenant.id,
          request.body as Record<string, unknown>,
        );
        return reply.code(201).send({ data: item as never });
      },
    );
  }

  app.post(
    '/tenants/:id/clients',
    {
      schema: {
        operationId: 'adminCreateClient',
        params: IdParams,
        body: CreateClientBody,
        response: { 201: DataOf(Type.Ref(Client)), ...common },
      },
    },
    async (request, reply) => {
      const tenant = await services.tenants.get(request.params.id);
      return reply.code(201).send({ data: await services.clients.create(tenant.id, request.body) });
    },
  );

  for (const action of ['archive', 'unarchive'] as const) {
    app.post(
      `/clients/:id/${action}`,
      {
        schema: {
          operationId: `adminClient_${action}`,
          params: IdParams,
          response: { 200: DataOf(Type.Ref(Client)), ...common },
        },
      },
      async (request) => {
        const tenantId = await tenantOf(repos.clients, request.params.id, 'Client');
        return {
          data: await services.clients.setArchived(
            tenantId,
            request.params.id,
            action === 'archive',
          ),
        };
      },
    );
  }

  for (const action of ['publish', 'unpublish'] as const) {
    app.post(
      `/trips/:id/${action}`,
      {
        schema: {
          operationId: `adminTrip_${action}`,
          params: IdParams,
          response: { 200: DataOf(Type.Ref(Trip)), ...common },
        },
      },
      async (request) => {
        const tenantId = await tenantOf(repos.trips, request.params.id, 'Trip');
        return { data: await services.trips[action](tenantId, request.params.id) };
      },
    );
  }

  app.post(
    '/webhooks/:id/enable',
    {
      schema: {
        operationId: 'adminEnableWebhook',
        params: IdParams,
        response: { 200: DataOf(Type.Ref(WebhookSubscription)), ...common },
      },
    },
    async (request) => ({ data: await services.webhooks.enable(request.params.id) }),
  );

  app.post(
    '/trips/:id/status',
    {
      schema: {
        operationId: 'adminTripStatus',
        params: IdParams,
        body: Type.Object({ status: StringEnum(TRIP_STATUSES) }, { additionalProperties: false }),
        response: { 200: DataOf(Type.Ref(Trip)), ...common },
      },
    },
    async (request) => {
      const tenantId = await tenantOf(repos.trips, request.params.id, 'Trip');
      return {
        data: await services.trips.setStatus(tenantId, request.params.id, request.body.status),
      };
    },
  );

  app.post(
    '/bookings',
    {
      schema: {
        operationId: 'adminCreateBooking',
        body: Type.Object(
          {
            tripId: Type.String({ minLength: 1 }),
            totalRetailCents: Money,
            currency: Currency,
            travelerName: Type.String({ minLength: 1, maxLength: 200 }),
            travelerEmail: Email,
            departureId: Type.Optional(Type.String({ maxLength: 100 })),
            departureStartDate: Type.Optional(Type.String()),
            departureEndDate: Type.Optional(Type.String()),
          },
          { additionalProperties: false },
        ),
        response: { 201: DataOf(Type.Ref(Booking)), ...common },
      },
    },
    async (request, reply) => {
      const tenantId = await repos.trips.findTenantOf(request.body.tripId);
      if (!tenantId) throw fieldError('tripId', 'is not a known trip');
      return reply.code(201).send({ data: await services.bookings.create(tenantId, request.body) });
    },
  );

  app.post(
    '/bookings/:id/transition',
    {
      schema: {
        operationId: 'adminBookingTransition',
        params: IdParams,
        body: Transition(BOOKING_STATUSES),
        response: { 200: DataOf(Type.Ref(Booking)), ...common },
      },
    },
    async (request) => {
      const tenantId = await tenantOf(repos.bookings, request.params.id, 'Booking');
      return {
        data: await services.bookings.transition(tenantId, request.params.id, request.body.to),
      };
    },
  );

  app.post(
    '/bookings/:id/payments',
    {
      schema: {
        operationId: 'adminCreatePayment',
        params: IdParams,
        body: Type.Object(
          {
            mode: StringEnum(PAYMENT_MODES),
            label: Type.String({ minLength: 1, maxLength: 200 }),
            amountCents: Money,
            currency: Currency,
            kind: Type.String({ minLength: 1, maxLength: 40 }),
            scheduledFor: Type.Optional(Type.String()),
            paymentRail: Type.Optional(Type.String({ maxLength: 40 })),
          },
          { additionalProperties: false },
        ),
        response: { 201: DataOf(Type.Ref(Payment)), ...common },
      },
    },
    async (request, reply) => {
      const tenantId = await tenantOf(repos.bookings, request.params.id, 'Booking');
      const payment = await services.payments.create(tenantId, request.params.id, request.body);
      return reply.code(201).send({ data: payment });
    },
  );

  app.post(
    '/payments/:id/transition',
    {
      schema: {
        operationId: 'adminPaymentTransition',
        params: IdParams,
        body: Transition(PAYMENT_STATUSES),
        response: { 200: DataOf(Type.Ref(Payment)), ...common },
      },
    },
    async (request) => {
      const tenantId = await tenantOf(repos.payments, request.params.id, 'Payment');
      return {
        data: await services.payments.transition(tenantId, request.params.id, request.body.to),
      };
    },
  );
};
