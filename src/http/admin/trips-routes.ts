import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { Trip } from '../../domain/resources.ts';
import { StringEnum } from '../../domain/schema-kit.ts';
import { TRIP_STATUSES } from '../../domain/states.ts';
import { DataOf, IdParams } from '../schemas.ts';
import { type AdminRouteOptions, adminProblems } from './shared.ts';

/** A trip's publication and status, which the public API only reads. */
export const adminTripRoutes: FastifyPluginAsyncTypebox<AdminRouteOptions> = async (
  app,
  { services },
) => {
  for (const action of ['publish', 'unpublish'] as const) {
    app.post(
      `/trips/:id/${action}`,
      {
        schema: {
          operationId: `adminTrip_${action}`,
          tags: ['Trips'],
          summary: `${action === 'publish' ? 'Publish' : 'Unpublish'} a trip`,
          description:
            'Emits `trip.published` or `trip.unpublished`; doing it twice changes nothing.',
          params: IdParams,
          response: { 200: DataOf(Type.Ref(Trip)), ...adminProblems },
        },
      },
      async function setPublished(request) {
        const tenantId = await services.trips.tenantOf(request.params.id);
        return { data: await services.trips[action](tenantId, request.params.id) };
      },
    );
  }

  app.post(
    '/trips/:id/status',
    {
      schema: {
        operationId: 'adminTripStatus',
        tags: ['Trips'],
        summary: "Set a trip's status",
        description:
          'Only the moves of the trip state machine are allowed ([State machines](#description/state-machines)); any other is 409 `invalid_transition` with `from` and `allowed`.',
        params: IdParams,
        body: Type.Object({ status: StringEnum(TRIP_STATUSES) }, { additionalProperties: false }),
        response: { 200: DataOf(Type.Ref(Trip)), ...adminProblems },
      },
    },
    async function setTripStatus(request) {
      const tenantId = await services.trips.tenantOf(request.params.id);
      return {
        data: await services.trips.setStatus(tenantId, request.params.id, request.body.status),
      };
    },
  );
};
