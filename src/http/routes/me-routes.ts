import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { SCOPES, TIER_NAMES } from '../../domain/plans.ts';
import { NullableString } from '../../domain/resources.ts';
import { DateTime, Nullable, NullableDateTime, StringEnum } from '../../domain/schema-kit.ts';
import { toPublicToken } from '../../services/tokens-service.ts';
import { callerOf } from '../pipeline/auth.ts';
import { ok, problems } from '../schemas.ts';
import type { RouteOptions } from './options.ts';

const Introspection = Type.Object(
  {
    tenant: Nullable(
      Type.Object({
        id: Type.String(),
        name: Type.String(),
        slug: Type.String(),
        active: Type.Boolean(),
      }),
    ),
    token: Nullable(
      Type.Object({
        id: Type.String(),
        name: NullableString,
        prefix: Type.String({ description: 'Leading characters only, never the token.' }),
        scopes: Type.Array(StringEnum(SCOPES)),
        lastUsedAt: NullableDateTime,
        expiresAt: NullableDateTime,
        createdAt: Nullable(DateTime),
        revoked: Type.Boolean(),
      }),
    ),
    tier: StringEnum(TIER_NAMES, { description: "The tenant's plan." }),
    env: StringEnum(['live', 'test']),
  },
  { additionalProperties: false },
);

export const meRoutes: FastifyPluginAsyncTypebox<RouteOptions> = async (app) => {
  app.get(
    '/me',
    {
      schema: {
        operationId: 'getMe',
        tags: ['Token'],
        summary: 'Introspect the calling token',
        description: 'Not wrapped in `data`. Never returns the token value.',
        response: {
          200: ok(Introspection, 'The token, its tenant, plan tier and environment.'),
          ...problems(401, 403, 429),
        },
      },
    },
    async (request) => {
      const { tenant, token } = callerOf(request);
      return {
        tenant: {
          id: tenant.id,
          name: tenant.name,
          slug: tenant.slug,
          active: tenant.active,
        },
        token: toPublicToken(token),
        tier: tenant.tier,
        env: token.env as 'live' | 'test',
      };
    },
  );
};
