import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { Trip } from '../../domain/resources.ts';
import { DateTime, Nullable, StringEnum } from '../../domain/schema-kit.ts';
import { PRICING_DISPLAY_MODES, TRANSPORT_MODES, TRIP_STATUSES } from '../../domain/states.ts';
import { callerOf } from '../pipeline/auth.ts';
import {
  CalendarDate,
  DataOf,
  IdempotencyHeaders,
  IdParams,
  ok,
  PageOf,
  PageQuery,
  problems,
  Query,
} from '../schemas.ts';
import type { RouteOptions } from './options.ts';

const ListTripsQuery = Query({
  ...PageQuery,
  // Documented as the closed set it is, yet any string passes: an unknown value is ignored.
  status: Type.Union([StringEnum(TRIP_STATUSES), Type.String()], {
    description: 'One trip status; an unknown value is ignored.',
  }),
  'publishedAt[gte]': { ...DateTime, description: 'Only trips published at or after it.' },
});

const CreateTripBody = Type.Object(
  {
    title: Type.String({ minLength: 1, maxLength: 200 }),
    startDate: CalendarDate,
    endDate: Type.Optional(CalendarDate),
    daysCount: Type.Integer({ minimum: 1, maximum: 365 }),
    startCityId: Type.String({ minLength: 1, description: 'Library city id.' }),
    endCityId: Type.String({ minLength: 1, description: 'Library city id.' }),
    transportMode: Type.Optional(StringEnum(TRANSPORT_MODES, { default: 'own_fleet' })),
    pricingDisplayMode: Type.Optional(StringEnum(PRICING_DISPLAY_MODES, { default: 'per_person' })),
    notes: Type.Optional(Type.String({ maxLength: 2000 })),
    shortDescription: Type.Optional(Type.String({ maxLength: 500 })),
    longDescription: Type.Optional(Type.String({ maxLength: 8000 })),
    clientId: Type.Optional(Type.String({ description: 'Must belong to the tenant.' })),
  },
  { additionalProperties: false },
);

const PatchTripBody = Type.Object(
  {
    title: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    startDate: Type.Optional(CalendarDate),
    endDate: Type.Optional(Nullable(CalendarDate)),
    daysCount: Type.Optional(Type.Integer({ minimum: 1, maximum: 365 })),
    notes: Type.Optional(Nullable(Type.String({ maxLength: 2000 }))),
    shortDescription: Type.Optional(Nullable(Type.String({ maxLength: 500 }))),
    longDescription: Type.Optional(Nullable(Type.String({ maxLength: 8000 }))),
    clientId: Type.Optional(Nullable(Type.String())),
  },
  { additionalProperties: false },
);

export const tripRoutes: FastifyPluginAsyncTypebox<RouteOptions> = async (
  app,
  { services, writes },
) => {
  app.get(
    '/trips',
    {
      config: { scope: 'trips:read' },
      schema: {
        operationId: 'listTrips',
        tags: ['Trips'],
        summary: 'List trips, by id ascending',
        description:
          'Keyset pagination: pass `meta.cursor` as `cursor` for the next page; `limit` 1-100 (default 50). Filter by `status` (an unknown value is ignored) and `publishedAt[gte]` (any RFC 3339 offset; compared as an instant). Scope `trips:read`.',
        querystring: ListTripsQuery,
        response: {
          200: ok(PageOf(Type.Ref(Trip)), 'A page of trips.'),
          ...problems(401, 403, 422, 429),
        },
      },
    },
    async (request) => {
      const { limit, cursor, status } = request.query;
      return services.trips.list(callerOf(request).tenant.id, {
        limit,
        cursor,
        status,
        publishedAtGte: request.query['publishedAt[gte]'],
      });
    },
  );

  app.post(
    '/trips',
    {
      config: { scope: 'trips:write' },
      schema: {
        operationId: 'createTrip',
        tags: ['Trips'],
        summary: 'Create a trip',
        description:
          "Created as `draft`. The token's creator is recorded as the audit actor. 403 `forbidden` with `code` `trip_quota_exceeded` when the plan's trip quota is full.",
        headers: IdempotencyHeaders,
        body: CreateTripBody,
        response: {
          201: ok(DataOf(Type.Ref(Trip)), 'The created trip.'),
          ...problems(401, 403, 409, 422, 429),
        },
      },
    },
    async (request, reply) => {
      const { tenant, token } = callerOf(request);
      return writes.run(request, reply, async () => ({
        status: 201,
        // The audit actor is the member who minted the token, else the token itself.
        body: {
          data: await services.trips.create(tenant.id, token.createdBy ?? token.id, request.body),
        },
      }));
    },
  );

  app.get(
    '/trips/:id',
    {
      config: { scope: 'trips:read' },
      schema: {
        operationId: 'getTrip',
        tags: ['Trips'],
        summary: 'Get a trip',
        description:
          "A trip of the calling tenant; another tenant's id is 404, like an unknown one. Scope `trips:read`.",
        params: IdParams,
        response: { 200: ok(DataOf(Type.Ref(Trip)), 'The trip.'), ...problems(401, 403, 404, 429) },
      },
    },
    async (request) => ({
      data: await services.trips.get(callerOf(request).tenant.id, request.params.id),
    }),
  );

  app.patch(
    '/trips/:id',
    {
      config: { scope: 'trips:write' },
      schema: {
        operationId: 'updateTrip',
        tags: ['Trips'],
        summary: 'Partially update a trip',
        description: 'Omitted fields are unchanged; `null` clears a nullable field.',
        params: IdParams,
        headers: IdempotencyHeaders,
        body: PatchTripBody,
        response: {
          200: ok(DataOf(Type.Ref(Trip)), 'The trip.'),
          ...problems(401, 403, 404, 409, 422, 429),
        },
      },
    },
    async (request, reply) => {
      const tenantId = callerOf(request).tenant.id;
      return writes.run(request, reply, async () => ({
        status: 200,
        body: { data: await services.trips.update(tenantId, request.params.id, request.body) },
      }));
    },
  );
};
