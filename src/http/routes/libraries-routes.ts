import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { CITY_SCOPED_KINDS, LIBRARY_KINDS } from '../../domain/library.ts';
import { callerOf } from '../pipeline/auth.ts';
import { LibraryItems, ok, PageOf, PageQuery, problems, Query } from '../schemas.ts';
import type { RouteOptions } from './options.ts';

const OPERATION = {
  cities: 'listCities',
  hotels: 'listHotels',
  activities: 'listActivities',
  vehicles: 'listVehicles',
  guides: 'listGuides',
} as const;

/** The four catalogs of the spec plus `cities`, the ids trips need (additive). */
export const libraryRoutes: FastifyPluginAsyncTypebox<RouteOptions> = async (app, { services }) => {
  for (const kind of LIBRARY_KINDS) {
    const filters = {
      ...PageQuery,
      q: Type.String({
        minLength: 1,
        maxLength: 200,
        description: 'Name contains, case-insensitive.',
      }),
      ...(CITY_SCOPED_KINDS.includes(kind) ? { cityId: Type.String() } : {}),
    };
    app.get(
      `/libraries/${kind}`,
      {
        config: { scope: 'libraries:read' },
        schema: {
          operationId: OPERATION[kind],
          tags: ['Libraries'],
          summary: `List the tenant's ${kind} catalog, by id ascending`,
          description:
            `Keyset pagination like every list; ` +
            `${CITY_SCOPED_KINDS.includes(kind) ? '`cityId` filters by city, ' : ''}` +
            '`q` matches names (contains, case-insensitive). Scope `libraries:read`.',
          querystring: Query(filters),
          response: {
            200: ok(PageOf(Type.Ref(LibraryItems[kind])), 'A page of catalog items.'),
            ...problems(401, 403, 422, 429),
          },
        },
      },
      async (request) => {
        const query = request.query as {
          limit?: number;
          cursor?: string;
          q?: string;
          cityId?: string;
        };
        const page = await services.library.list(callerOf(request).tenant.id, kind, {
          limit: query.limit,
          cursor: query.cursor,
          q: query.q,
          cityId: query.cityId,
        });
        // Rows carry exactly the kind's columns; its schema (which serializes them) is the type.
        return page as never;
      },
    );
  }
};
