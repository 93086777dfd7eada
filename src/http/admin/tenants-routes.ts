import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { SCOPES, TIER_NAMES } from '../../domain/plans.ts';
import { NullableString } from '../../domain/resources.ts';
import { DateTime, Nullable, NullableDateTime, StringEnum } from '../../domain/schema-kit.ts';
import { MEMBER_ROLES } from '../../domain/states.ts';
import {
  TENANT_NAME_MAX_LENGTH,
  TENANT_SLUG_PATTERN,
  TENANT_SLUG_RULE,
} from '../../domain/tenants.ts';
import { DataOf, Email, IdParams } from '../schemas.ts';
import { type AdminRouteOptions, adminProblems } from './shared.ts';

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

const CreateTenantBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: TENANT_NAME_MAX_LENGTH }),
    slug: Type.String({
      pattern: TENANT_SLUG_PATTERN.source,
      description: TENANT_SLUG_RULE,
    }),
    tier: StringEnum(TIER_NAMES),
  },
  { additionalProperties: false },
);

const UpdateTenantBody = Type.Object(
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
);

const CreateTokenBody = Type.Object(
  {
    scopes: Type.Array(StringEnum([...SCOPES, '*']), { minItems: 1 }),
    name: Type.Optional(Nullable(Type.String({ maxLength: 200 }))),
    expiresAt: Type.Optional(
      Nullable(
        Type.String({
          format: 'date-time',
          description: 'When the token stops working; in the future (else 422), null for never.',
        }),
      ),
    ),
    createdBy: Type.Optional(Nullable(Type.String())),
  },
  { additionalProperties: false },
);

/** Tenants, their members, notifications and API tokens. */
export const adminTenantRoutes: FastifyPluginAsyncTypebox<AdminRouteOptions> = async (
  app,
  { services },
) => {
  app.post(
    '/tenants',
    {
      schema: {
        operationId: 'adminCreateTenant',
        tags: ['Tenants'],
        summary: 'Create a tenant',
        description: '409 `slug_taken` when the slug is in use.',
        body: CreateTenantBody,
        response: { 201: DataOf(Tenant), ...adminProblems },
      },
    },
    async function createTenant(request, reply) {
      return reply.code(201).send({ data: await services.tenants.create(request.body) });
    },
  );

  app.get(
    '/tenants/:id',
    {
      schema: {
        operationId: 'adminGetTenant',
        tags: ['Tenants'],
        summary: 'Get a tenant',
        description: 'Its plan, whether it is active, and its effective quotas.',
        params: IdParams,
        response: { 200: DataOf(Tenant), ...adminProblems },
      },
    },
    async function getTenant(request) {
      return { data: await services.tenants.get(request.params.id) };
    },
  );

  app.patch(
    '/tenants/:id',
    {
      schema: {
        operationId: 'adminUpdateTenant',
        tags: ['Tenants'],
        summary: "Change a tenant's name, plan, activity or quotas",
        description: 'Applies at once to every token of the tenant, in every process.',
        params: IdParams,
        body: UpdateTenantBody,
        response: { 200: DataOf(Tenant), ...adminProblems },
      },
    },
    async function updateTenant(request) {
      return { data: await services.tenants.update(request.params.id, request.body) };
    },
  );

  app.post(
    '/tenants/:id/members',
    {
      schema: {
        operationId: 'adminAddMember',
        tags: ['Tenants'],
        summary: 'Add a member to a tenant',
        description:
          'Owners and admins receive auto-pause notices. 409 `member_exists` for a known email.',
        params: IdParams,
        body: Type.Object(
          { email: Email, role: StringEnum(MEMBER_ROLES) },
          { additionalProperties: false },
        ),
        response: { 201: DataOf(Member), ...adminProblems },
      },
    },
    async function addMember(request, reply) {
      const member = await services.tenants.addMember(request.params.id, request.body);
      return reply.code(201).send({ data: member });
    },
  );

  app.get(
    '/tenants/:id/notifications',
    {
      schema: {
        operationId: 'adminListNotifications',
        tags: ['Tenants'],
        summary: "List a tenant's notifications, newest first",
        description: 'One row per recipient of each notice (an auto-paused webhook subscription).',
        params: IdParams,
        response: { 200: DataOf(Type.Array(Notification)), ...adminProblems },
      },
    },
    async function listNotifications(request) {
      return { data: await services.tenants.listNotifications(request.params.id) };
    },
  );

  app.post(
    '/tenants/:id/tokens',
    {
      schema: {
        operationId: 'adminCreateToken',
        tags: ['Tokens'],
        summary: 'Mint an API token for a tenant',
        description: 'The token value is in the answer only; it is stored as a SHA-256 hash.',
        params: IdParams,
        body: CreateTokenBody,
        response: {
          201: Type.Object(
            { data: TokenObject, token: Type.String({ description: 'Shown only here.' }) },
            { additionalProperties: false },
          ),
          ...adminProblems,
        },
      },
    },
    async function createToken(request, reply) {
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
        tags: ['Tokens'],
        summary: 'Revoke an API token',
        description: 'Refused at once by every process; revoking twice keeps the first time.',
        params: IdParams,
        response: { 200: DataOf(TokenObject), ...adminProblems },
      },
    },
    async function revokeToken(request) {
      return { data: await services.tokens.revoke(request.params.id) };
    },
  );
};
