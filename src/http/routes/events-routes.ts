import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { StringEnum } from '../../domain/schema-kit.ts';
import { EVENT_TYPES } from '../../domain/states.ts';
import { callerOf } from '../pipeline/auth.ts';
import { DataOf, IdParams, ok, problems } from '../schemas.ts';
import type { RouteOptions } from './options.ts';

const EventBody = Type.Object(
  {
    id: Type.String({ format: 'uuid', description: 'The event id (`Service-Event-Id`).' }),
    type: StringEnum(EVENT_TYPES, { description: 'The event type.' }),
    created: Type.Integer({
      minimum: 0,
      description: 'Unix seconds of the event (push sends the time of the attempt).',
    }),
    test: Type.Optional(
      Type.Literal(true, { description: 'Present only on a test fire: sample data.' }),
    ),
    data: Type.Record(Type.String(), Type.Unknown(), {
      description:
        "The event's full `data`, as a `full` subscription gets it now: after an erasure, with that person's members redacted.",
    }),
  },
  { additionalProperties: false },
);

/** One event's full body: what a `thin` delivery's receiver fetches. */
export const eventRoutes: FastifyPluginAsyncTypebox<RouteOptions> = async (app, { services }) => {
  app.get(
    '/events/:id',
    {
      schema: {
        operationId: 'getEvent',
        tags: ['Webhook endpoints'],
        summary: "Get an event's full body",
        description:
          "The event as a `full` subscription gets it (without `sequence`, which is a subscription's), for a receiver of `thin` deliveries. Scope: the read scope of the event's resource (`trips:read`, `bookings:read`, `payments:read` for payments and disputes, `clients:read` for clients and `personal_data.erased`, `webhooks:read` for `webhook.*`). 404 for another tenant's event and past retention.",
        params: IdParams,
        response: {
          200: ok(DataOf(EventBody), 'The event.'),
          ...problems(401, 403, 404, 429),
        },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      return {
        data: await services.events.body(caller.tenant.id, request.params.id, caller.scopes),
      };
    },
  );
};
