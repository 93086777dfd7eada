import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { StringEnum } from '../../domain/schema-kit.ts';
import { DELIVERY_STATUSES, SUBSCRIBABLE_EVENT_TYPES } from '../../domain/states.ts';
import { callerOf } from '../pipeline/auth.ts';
import {
  DataOf,
  IdempotencyHeaders,
  IdParams,
  ok,
  PageOf,
  PageQuery,
  problems,
  Query,
} from '../schemas.ts';
import { WebhookAttempt, WebhookDelivery } from '../webhook-schemas.ts';
import type { RouteOptions } from './options.ts';

const LedgerQuery = Query({
  after: Type.Integer({
    minimum: 0,
    maximum: Number.MAX_SAFE_INTEGER,
    default: 0,
    description: 'The last sequence already processed; the answer starts after it.',
  }),
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 50, description: 'Page size, 1-100.' }),
  type: StringEnum(SUBSCRIBABLE_EVENT_TYPES, { description: 'Only events of this type.' }),
  deliveryStatus: StringEnum(DELIVERY_STATUSES, {
    description: 'Only events whose latest delivery is in this status.',
  }),
});

const LedgerEvent = Type.Object(
  {
    id: Type.String({ description: 'The event id (`Service-Event-Id`).' }),
    type: Type.String({ description: 'The event type.' }),
    created: Type.Integer({
      description: 'Unix seconds of the event (push sends the time of the attempt).',
    }),
    data: Type.Record(Type.String(), Type.Unknown(), {
      description: 'The event data, as push sends it (its thin form for a `thin` subscription).',
    }),
    sequence: Type.Integer({ minimum: 1, description: "The event's place in this ledger." }),
    deliveryStatus: StringEnum(DELIVERY_STATUSES, {
      description: 'Status of its latest delivery (the original or its latest redelivery).',
    }),
    deliveryId: Type.String({ description: 'Its latest delivery.' }),
  },
  { additionalProperties: false },
);

const DeliveriesQuery = Query({
  ...PageQuery,
  status: StringEnum(DELIVERY_STATUSES, { description: 'Only deliveries in this status.' }),
});

const DeliveryParams = Type.Object({ id: Type.String(), deliveryId: Type.String() });

export const RecoverWebhookBody = Type.Object(
  {
    since: Type.String({ format: 'date-time', description: 'Start of the window (RFC 3339).' }),
    until: Type.Optional(
      Type.String({
        format: 'date-time',
        description: 'End of the window, excluded; default now.',
      }),
    ),
    missed: Type.Optional(
      Type.Boolean({
        description:
          "Also queue the window's events of the subscription's types that it got no delivery for while it was paused (never before its creation, never while deleted), in the order they were emitted, each with the next `sequence`. Default false.",
      }),
    ),
  },
  { additionalProperties: false },
);

/**
 * What a subscription was sent and what it can get again: its ledger (pull), its deliveries and
 * their attempts, redelivery and recovery.
 */
export const webhookDeliveryRoutes: FastifyPluginAsyncTypebox<RouteOptions> = async (
  app,
  { services, writes },
) => {
  app.get(
    '/webhooks/:id/events',
    {
      config: { scope: 'webhooks:read' },
      schema: {
        operationId: 'listWebhookEvents',
        tags: ['Webhook endpoints'],
        summary: "Pull the subscription's events after a sequence (the same ledger push sends)",
        description:
          "Each event fanned out to this subscription, ascending by `sequence`, exactly as push sends it plus its latest delivery's `deliveryStatus` and `deliveryId`. A receiver that processed up to N asks `after=N`. When retention removed a sequence before the first event of the answer, 409 `conflict` with `code` `events_expired` and `firstSequence` (the first kept after it); one further on ends the page before it: never a silent skip. Paused and deleted subscriptions keep their ledger until retention. Scope `webhooks:read`.",
        params: IdParams,
        querystring: LedgerQuery,
        response: {
          200: ok(
            Type.Object(
              {
                data: Type.Array(LedgerEvent),
                meta: Type.Object(
                  {
                    hasMore: Type.Boolean({
                      description: 'More events follow: ask again with the last `sequence`.',
                    }),
                  },
                  { additionalProperties: false },
                ),
              },
              { additionalProperties: false },
            ),
            'A page of the ledger.',
          ),
          ...problems(401, 403, 404, 409, 422, 429),
        },
      },
    },
    async (request) => {
      const { after = 0, limit = 50, type, deliveryStatus } = request.query;
      return services.deliveries.ledger(callerOf(request).tenant.id, request.params.id, {
        after,
        limit,
        type,
        deliveryStatus,
      });
    },
  );

  app.get(
    '/webhooks/:id/deliveries',
    {
      config: { scope: 'webhooks:read' },
      schema: {
        operationId: 'listWebhookDeliveries',
        tags: ['Webhook endpoints'],
        summary: 'List deliveries of a subscription, newest first',
        description:
          'One row per delivery of an event to this subscription (a redelivery is a new row). Filter by `status`. Scope `webhooks:read`.',
        params: IdParams,
        querystring: DeliveriesQuery,
        response: {
          200: ok(PageOf(Type.Ref(WebhookDelivery)), 'A page of deliveries.'),
          ...problems(401, 403, 404, 422, 429),
        },
      },
    },
    async (request) => {
      const { limit, cursor, status } = request.query;
      return services.deliveries.listDeliveries(callerOf(request).tenant.id, request.params.id, {
        limit,
        cursor,
        status,
      });
    },
  );

  app.get(
    '/webhooks/:id/deliveries/:deliveryId/attempts',
    {
      config: { scope: 'webhooks:read' },
      schema: {
        operationId: 'listWebhookAttempts',
        tags: ['Webhook endpoints'],
        summary: 'List the HTTP attempts of a delivery, newest first',
        description:
          'What each attempt got: its status, or why there was none (`errorClass`), how long it took, the start of the response body and any `Retry-After` it carried. Scope `webhooks:read`.',
        params: DeliveryParams,
        querystring: Query(PageQuery),
        response: {
          200: ok(PageOf(Type.Ref(WebhookAttempt)), 'A page of attempts.'),
          ...problems(401, 403, 404, 422, 429),
        },
      },
    },
    async (request) => {
      const { id, deliveryId } = request.params;
      return services.deliveries.listAttempts(
        callerOf(request).tenant.id,
        id,
        deliveryId,
        request.query,
      );
    },
  );

  app.post(
    '/webhooks/:id/deliveries/:deliveryId/redeliver',
    {
      config: { scope: 'webhooks:write' },
      schema: {
        operationId: 'redeliverWebhook',
        tags: ['Webhook endpoints'],
        summary: 'Send an event again: a new delivery row, same event id, attempts from 1',
        description:
          '409 `conflict` with `code` `in_flight` while an attempt runs, `subscription_inactive` when the subscription is paused or deleted.',
        headers: IdempotencyHeaders,
        params: DeliveryParams,
        response: {
          202: ok(
            DataOf(
              Type.Object(
                {
                  deliveryId: Type.String(),
                  eventId: Type.String(),
                  status: Type.Literal('pending'),
                },
                { additionalProperties: false },
              ),
            ),
            'Queued.',
          ),
          ...problems(401, 403, 404, 409, 422, 429),
        },
      },
    },
    async (request, reply) => {
      const tenantId = callerOf(request).tenant.id;
      const { id, deliveryId } = request.params;
      return writes.run(request, reply, async () => ({
        status: 202,
        body: { data: await services.deliveries.redeliver(tenantId, id, deliveryId) },
      }));
    },
  );

  app.post(
    '/webhooks/:id/recover',
    {
      config: { scope: 'webhooks:write' },
      schema: {
        operationId: 'recoverWebhook',
        tags: ['Webhook endpoints'],
        summary: 'Redeliver every dead-lettered delivery of a time window',
        description:
          'Queues one new delivery (as redeliver does) for every `dead_letter` delivery of the subscription created at or after `since` and before `until` (default: now); with `missed: true`, also one for every event of the window it missed while paused, with new sequences. At most 10,000: a larger window is 422, nothing queued. 409 `subscription_inactive` when the subscription is paused or deleted: enable it first.',
        headers: IdempotencyHeaders,
        params: IdParams,
        body: RecoverWebhookBody,
        response: {
          202: ok(
            DataOf(
              Type.Object(
                { queued: Type.Integer({ minimum: 0, description: 'Deliveries queued.' }) },
                { additionalProperties: false },
              ),
            ),
            'Queued.',
          ),
          ...problems(401, 403, 404, 409, 422, 429),
        },
      },
    },
    async (request, reply) => {
      const tenantId = callerOf(request).tenant.id;
      return writes.run(request, reply, async () => ({
        status: 202,
        body: {
          data: await services.deliveries.recover(tenantId, request.params.id, request.body),
        },
      }));
    },
  );
};
