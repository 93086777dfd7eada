import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { StringEnum } from '../../domain/schema-kit.ts';
import { EVENT_TYPES } from '../../domain/states.ts';
import { eventCatalog } from '../reference/webhook-docs.ts';
import { DataOf, ok, problems } from '../schemas.ts';
import type { RouteOptions } from './options.ts';

const EventTypeEntry = Type.Object(
  {
    type: StringEnum(EVENT_TYPES),
    description: Type.String({
      description: 'What the event announces.',
      examples: ['A client was created.'],
    }),
    subscribable: Type.Boolean({
      description: "Whether a subscription's `events` may list it (`webhook.test` is fired only).",
    }),
    schema: Type.Unknown({
      description:
        'The JSON Schema (2020-12) of the whole body, the one each event is validated against when it is emitted: closed (`additionalProperties: false`) as emitted today; new members are additive, so a receiver should not reject them.',
      examples: [
        {
          $schema: 'https://json-schema.org/draft/2020-12/schema',
          type: 'object',
          required: ['id', 'type', 'created', 'data'],
          properties: { type: { type: 'string', const: 'client.created' } },
        },
      ],
    }),
    thinSchema: Type.Unknown({
      description:
        'The JSON Schema (2020-12) of the body a subscription with `payload: thin` gets: the same envelope, `data` holding only the `…Id` members of the full `data` and `changed` (the names of the members the change moved).',
      examples: [
        {
          $schema: 'https://json-schema.org/draft/2020-12/schema',
          type: 'object',
          required: ['id', 'type', 'created', 'data'],
          properties: { data: { type: 'object', required: ['clientId', 'changed'] } },
        },
      ],
    }),
    example: Type.Unknown({
      description: 'A body of the type.',
      examples: [
        {
          id: '0b7e8f52-3c1d-4e7a-9f26-5d8c1a4b7e90',
          type: 'client.created',
          created: 1_793_870_565,
          data: {},
        },
      ],
    }),
  },
  { additionalProperties: false },
);

export const eventTypeRoutes: FastifyPluginAsyncTypebox<RouteOptions> = async (app) => {
  // Built once: the catalog is the code's own, the same for every caller.
  const catalog = { data: eventCatalog() };
  app.get(
    '/event-types',
    {
      schema: {
        operationId: 'listEventTypes',
        tags: ['Webhook endpoints'],
        summary: 'List the event types, with the schema of their bodies',
        description:
          'Every event type: what it announces, whether it can be subscribed, the JSON Schema of its body and an example. Payload filters are checked against these schemas. Any valid token, whatever its scopes.',
        response: {
          200: ok(DataOf(Type.Array(EventTypeEntry)), 'The event catalog.'),
          ...problems(401, 403, 429),
        },
      },
    },
    async () => catalog,
  );
};
