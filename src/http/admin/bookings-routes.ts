import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { Booking } from '../../domain/resources.ts';
import { BOOKING_STATUSES } from '../../domain/states.ts';
import { DataOf, Email, IdParams } from '../schemas.ts';
import { type AdminRouteOptions, adminProblems, Currency, Money, Transition } from './shared.ts';

const CreateBookingBody = Type.Object(
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
);

/** Checkout's bookings and their transitions. */
export const adminBookingRoutes: FastifyPluginAsyncTypebox<AdminRouteOptions> = async (
  app,
  { services },
) => {
  app.post(
    '/bookings',
    {
      schema: {
        operationId: 'adminCreateBooking',
        tags: ['Bookings'],
        summary: 'Create a booking on a published trip (checkout)',
        description:
          'The trip names the tenant; the booking is pinned to its current version. 422 `errors.tripId` for an unknown or unpublished trip.',
        body: CreateBookingBody,
        response: { 201: DataOf(Type.Ref(Booking)), ...adminProblems },
      },
    },
    async function createBooking(request, reply) {
      return reply.code(201).send({ data: await services.bookings.createForTrip(request.body) });
    },
  );

  app.post(
    '/bookings/:id/transition',
    {
      schema: {
        operationId: 'adminBookingTransition',
        tags: ['Bookings'],
        summary: 'Move a booking to another status',
        description:
          'Only the moves of the booking state machine are allowed ([State machines](#description/state-machines)); any other is 409 `invalid_transition` with `from` and `allowed`. The events the table names are emitted.',
        params: IdParams,
        body: Transition(BOOKING_STATUSES),
        response: { 200: DataOf(Type.Ref(Booking)), ...adminProblems },
      },
    },
    async function transitionBooking(request) {
      const tenantId = await services.bookings.tenantOf(request.params.id);
      return {
        data: await services.bookings.transition(tenantId, request.params.id, request.body.to),
      };
    },
  );
};
