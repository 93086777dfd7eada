import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { Booking } from '../../domain/resources.ts';
import { callerOf } from '../pipeline/auth.ts';
import { toProblem } from '../pipeline/problem-reply.ts';
import {
  DataOf,
  Email,
  IdempotencyHeaders,
  IdParams,
  ok,
  PageOf,
  PageQuery,
  problems,
  Query,
} from '../schemas.ts';
import type { RouteOptions } from './options.ts';

const ListBookingsQuery = Query({
  ...PageQuery,
  status: Type.String({ description: 'One lifecycle state; an unknown value is ignored.' }),
  tripId: Type.String(),
});

const CreateBookingBody = Type.Object(
  {
    tripId: Type.String({ minLength: 1, description: 'A trip published in the tenant.' }),
    travelerName: Type.String({ minLength: 1, maxLength: 200 }),
    travelerEmail: Email,
  },
  { additionalProperties: false },
);

export const bookingRoutes: FastifyPluginAsyncTypebox<RouteOptions> = async (
  app,
  { services, writes },
) => {
  app.get(
    '/bookings',
    {
      config: { scope: 'bookings:read' },
      schema: {
        operationId: 'listBookings',
        tags: ['Bookings'],
        summary: 'List bookings, by id ascending',
        description:
          'Keyset pagination like every list. Filter by `status` (an unknown value is ignored) and `tripId`. Scope `bookings:read`.',
        querystring: ListBookingsQuery,
        response: {
          200: ok(PageOf(Type.Ref(Booking)), 'A page of bookings.'),
          ...problems(401, 403, 422, 429),
        },
      },
    },
    async (request) => {
      const { limit, cursor, status, tripId } = request.query;
      return services.bookings.list(callerOf(request).tenant.id, {
        limit,
        cursor,
        status,
        tripId,
      });
    },
  );

  app.post(
    '/bookings',
    {
      config: { scope: 'bookings:write' },
      schema: {
        operationId: 'createBooking',
        tags: ['Bookings'],
        summary: 'Create a booking (not supported yet: 501 after validation)',
        description:
          'Validates the request (404 for an unknown trip, 422 when it is not published), then ' +
          'always answers 501 `booking-create-not-supported` with `next.checkoutUrl`, the ' +
          'storefront checkout where the traveller completes payment. No booking is created.',
        headers: IdempotencyHeaders,
        body: CreateBookingBody,
        response: problems(401, 403, 404, 409, 422, 429, 501),
      },
      // The spec orders 404 (unknown trip) before 422, so schema failures wait for the trip lookup.
      attachValidation: true,
    },
    async (request, reply) => {
      const tenantId = callerOf(request).tenant.id;
      return writes.run(request, reply, async () => {
        const tripId = (request.body as { tripId?: unknown } | undefined)?.tripId;
        if (typeof tripId === 'string') await services.bookings.assertTripExists(tenantId, tripId);
        if (request.validationError)
          throw toProblem(request.validationError) ?? request.validationError;
        return services.bookings.refuseApiCreation(tenantId, request.body.tripId);
      });
    },
  );

  app.get(
    '/bookings/:id',
    {
      config: { scope: 'bookings:read' },
      schema: {
        operationId: 'getBooking',
        tags: ['Bookings'],
        summary: 'Get a booking',
        description:
          'A booking of the calling tenant, with the snapshot of the trip version it was made on. Scope `bookings:read`.',
        params: IdParams,
        response: {
          200: ok(DataOf(Type.Ref(Booking)), 'The booking.'),
          ...problems(401, 403, 404, 429),
        },
      },
    },
    async (request) => ({
      data: await services.bookings.get(callerOf(request).tenant.id, request.params.id),
    }),
  );
};
