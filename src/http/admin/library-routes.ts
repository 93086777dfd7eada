import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { LIBRARY_KINDS, type LibraryKind } from '../../domain/library.ts';
import { DataOf, Email, IdParams, LibraryItems } from '../schemas.ts';
import { type AdminRouteOptions, adminProblems } from './shared.ts';

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

/** Catalog items of a tenant, one create route per kind. */
export const adminLibraryRoutes: FastifyPluginAsyncTypebox<AdminRouteOptions> = async (
  app,
  { services },
) => {
  for (const kind of LIBRARY_KINDS) {
    app.post(
      `/tenants/:id/library/${kind}`,
      {
        schema: {
          operationId: `adminCreate_${kind}`,
          tags: ['Libraries'],
          summary: `Add an item to a tenant's ${kind} catalog`,
          description: "422 `errors.cityId` when the city is not in the same tenant's catalog.",
          params: IdParams,
          body: LIBRARY_BODIES[kind],
          response: { 201: DataOf(Type.Ref(LibraryItems[kind])), ...adminProblems },
        },
      },
      async function createLibraryItem(request, reply) {
        const tenant = await services.tenants.get(request.params.id);
        const item = await services.library.create(
          tenant.id,
          kind,
          request.body as Record<string, unknown>,
        );
        return reply.code(201).send({ data: item as never });
      },
    );
  }
};
