import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { DeliveryStatus } from '../../db/schema.ts';
import {
  DELIVERY_STATUSES,
  SUBSCRIBABLE_EVENT_TYPES,
  type SubscribableEventType,
} from '../../domain/states.ts';
import { fieldError } from '../../lib/problems.ts';
import type { FilterTestInput, TransformationTestInput } from '../../services/dry-runs-service.ts';
import type { Services } from '../../services/index.ts';
import type { PortalSession } from '../../services/portal-service.ts';
import type {
  CreateSubscriptionInput,
  UpdateSubscriptionInput,
} from '../../services/webhooks-service.ts';
import { RecoverWebhookBody } from '../routes/webhook-deliveries-routes.ts';
import {
  CreateWebhookBody,
  FilterTestBody,
  TestWebhookBody,
  TransformationTestBody,
  UpdateWebhookBody,
} from '../routes/webhooks-routes.ts';
import { bodyOf, type Form, field, formSchema } from './forms.ts';
import { sendPage } from './layout.ts';
import {
  catalogPage,
  deliveryPage,
  endpointPage,
  endpointsPage,
  filterTestPage,
  ledgerPage,
  newEndpointPage,
  signingKeyPage,
  type View,
} from './pages.ts';
import { RECEIVER_AUTH_FIELDS, receiverAuthReaders } from './receiver-auth-form.ts';
import { transformationTestPage } from './transformation-pages.ts';

export interface PortalPagesOptions {
  services: Services;
  view: (request: FastifyRequest, reply: FastifyReply) => View;
  /** Runs a change once per rendered form (see `once` in portal.ts). */
  once: <T>(request: FastifyRequest, work: () => Promise<T>) => Promise<T>;
}

/** The API's own body schemas judge the forms (forms.ts), with its messages. */
const createBody = formSchema(CreateWebhookBody);
const updateBody = formSchema(UpdateWebhookBody);
const recoverBody = formSchema(RecoverWebhookBody);
const testBody = formSchema(TestWebhookBody);
const filterTestBody = formSchema(FilterTestBody);
const transformationTestBody = formSchema(TransformationTestBody);
/** The changes that take no body in the API (delete, rotate, redeliver): their forms carry none. */
const noBody = formSchema(Type.Object({}, { additionalProperties: false }));

/** A subscription form's fields, as the API's create and update bodies take them. */
const SUBSCRIPTION_FIELDS = {
  url: field.text('url'),
  events: field.list('events'),
  standardWebhooks: field.checkbox('standardWebhooks'),
  asymmetricSignatures: field.checkbox('asymmetricSignatures'),
  maxConcurrency: field.integer('maxConcurrency'),
  maxPerSecond: field.integer('maxPerSecond', null),
  ordering: field.text('ordering'),
  payload: field.text('payload'),
  filter: field.json('filter'),
  transformation: field.code('transformation'),
  retrySchedule: field.durations('retrySchedule'),
};
const CREATE_FIELDS = { ...SUBSCRIPTION_FIELDS, ...receiverAuthReaders(false) };
const EDIT_FIELDS = { ...SUBSCRIPTION_FIELDS, ...receiverAuthReaders(true) };
type IdParams = { Params: { id: string }; Body: Form };
type DeliveryParams = { Params: { id: string; deliveryId: string }; Body: Form };

/** What a finished action says on the page it leads to: fixed sentences, never tenant text. */
const DONE: Record<string, string> = {
  saved: 'Saved.',
  paused: 'Deliveries are paused: new events wait until you enable the endpoint.',
  enabled: 'Enabled: waiting deliveries are being sent.',
  deleted: 'Deleted: no delivery will be sent to this endpoint.',
  test: 'Test event sent: it shows below within seconds.',
  recovered: 'Failed deliveries of the window are queued again.',
  healed:
    'Enabled: the events missed while paused and the deliveries that failed since are queued, in order.',
  redelivered: 'Queued again as this new delivery.',
};

const doneOf = (query: { done?: string }) => (query.done ? (DONE[query.done] ?? null) : null);

/** The signed-in pages and the changes their forms post. */
export const portalPages: FastifyPluginAsync<PortalPagesOptions> = async (
  app,
  { services, view, once },
) => {
  const tenantOf = (request: FastifyRequest) => (request.portal as PortalSession).tenantId;
  const { webhooks, deliveries } = services;

  app.get('/', async (request, reply) =>
    sendPage(reply, endpointsPage(view(request, reply), await webhooks.list(tenantOf(request)))),
  );

  app.get('/catalog', async (request, reply) => sendPage(reply, catalogPage(view(request, reply))));

  app.get('/endpoints/new', async (request, reply) =>
    sendPage(reply, newEndpointPage(view(request, reply))),
  );

  app.post<{ Body: Form }>('/endpoints', async (request, reply) => {
    const tenantId = tenantOf(request);
    const input = bodyOf<CreateSubscriptionInput>(createBody, request.body, CREATE_FIELDS, {
      also: RECEIVER_AUTH_FIELDS,
    });
    // Resolving the URL is no database work: it comes before the unit of work.
    const target = await webhooks.checkTarget(tenantId, input.url);
    const created = await once(request, () => webhooks.create(tenantId, input, target));
    return sendPage(
      reply,
      signingKeyPage(view(request, reply), created.subscription, created.signingKey, null),
    );
  });

  app.get<{ Params: { id: string }; Querystring: Record<string, string | undefined> }>(
    '/endpoints/:id',
    async (request, reply) => {
      const tenantId = tenantOf(request);
      const { id } = request.params;
      const status = oneOf(request.query.status, DELIVERY_STATUSES);
      const eventType = oneOf(request.query.type, [...SUBSCRIBABLE_EVENT_TYPES, 'webhook.test']);
      const subscription = await webhooks.get(tenantId, id);
      const page = await deliveries.listDeliveries(tenantId, id, {
        status: status as DeliveryStatus | undefined,
        eventType,
        cursor: request.query.cursor || undefined,
        limit: 25,
      });
      return sendPage(
        reply,
        endpointPage(view(request, reply), {
          subscription,
          deliveries: page,
          filter: { status, eventType },
          done: doneOf(request.query),
        }),
      );
    },
  );

  const back = (reply: FastifyReply, id: string, done: string) =>
    reply.redirect(`/portal/endpoints/${encodeURIComponent(id)}?done=${done}`, 303);

  app.post<IdParams>('/endpoints/:id', async (request, reply) => {
    const tenantId = tenantOf(request);
    const input = bodyOf<UpdateSubscriptionInput>(updateBody, request.body, EDIT_FIELDS, {
      also: RECEIVER_AUTH_FIELDS,
    });
    const target = input.url === undefined ? undefined : await webhooks.checkUrl(input.url);
    await once(request, () => webhooks.update(tenantId, request.params.id, input, target));
    return back(reply, request.params.id, 'saved');
  });

  for (const [action, active] of [
    ['pause', false],
    ['enable', true],
  ] as const) {
    app.post<IdParams>(`/endpoints/:id/${action}`, async (request, reply) => {
      const tenantId = tenantOf(request);
      const input = bodyOf<UpdateSubscriptionInput>(
        updateBody,
        request.body,
        {},
        {
          fixed: { active },
        },
      );
      await once(request, () => webhooks.update(tenantId, request.params.id, input));
      return back(reply, request.params.id, active ? 'enabled' : 'paused');
    });
  }

  app.post<IdParams>('/endpoints/:id/delete', async (request, reply) => {
    const tenantId = tenantOf(request);
    bodyOf(noBody, request.body, {});
    await once(request, () => webhooks.remove(tenantId, request.params.id));
    return back(reply, request.params.id, 'deleted');
  });

  app.post<IdParams>('/endpoints/:id/rotate-key', async (request, reply) => {
    const tenantId = tenantOf(request);
    bodyOf(noBody, request.body, {});
    const rotated = await once(request, () => webhooks.rotateKey(tenantId, request.params.id));
    return sendPage(
      reply,
      signingKeyPage(view(request, reply), rotated.subscription, rotated.signingKey, {
        oldKeyUntil: rotated.legacySigningKeyExpiresAt,
      }),
    );
  });

  app.post<IdParams>('/endpoints/:id/test', async (request, reply) => {
    const tenantId = tenantOf(request);
    const input = bodyOf<{ eventType?: SubscribableEventType }>(testBody, request.body, {
      eventType: field.text('eventType'),
    });
    if (input.eventType === undefined) throw fieldError('eventType', 'is required');
    const { eventType } = input;
    await once(request, () =>
      deliveries.fireTest(tenantId, { subscriptionId: request.params.id, eventType }),
    );
    return back(reply, request.params.id, 'test');
  });

  app.post<IdParams>('/endpoints/:id/recover', async (request, reply) => {
    const tenantId = tenantOf(request);
    const input = bodyOf<{ since: string }>(
      recoverBody,
      request.body,
      { since: field.instant('since', 'tzOffset') },
      { also: ['tzOffset'] },
    );
    await once(request, () => deliveries.recover(tenantId, request.params.id, input));
    return back(reply, request.params.id, 'recovered');
  });

  app.post<IdParams>('/endpoints/:id/enable-and-recover', async (request, reply) => {
    const tenantId = tenantOf(request);
    bodyOf(noBody, request.body, {});
    await once(request, () => deliveries.enableAndRecover(tenantId, request.params.id));
    return back(reply, request.params.id, 'healed');
  });

  app.get<{ Params: { id: string; deliveryId: string }; Querystring: { done?: string } }>(
    '/endpoints/:id/deliveries/:deliveryId',
    async (request, reply) => {
      const tenantId = tenantOf(request);
      const { id, deliveryId } = request.params;
      const subscription = await webhooks.get(tenantId, id);
      const { delivery, eventData } = await deliveries.getDelivery(tenantId, id, deliveryId);
      const attempts = await deliveries.listAttempts(tenantId, id, deliveryId, { limit: 100 });
      return sendPage(
        reply,
        deliveryPage(
          view(request, reply),
          subscription,
          delivery,
          eventData,
          attempts.data,
          doneOf(request.query),
        ),
      );
    },
  );

  app.post<DeliveryParams>(
    '/endpoints/:id/deliveries/:deliveryId/redeliver',
    async (request, reply) => {
      const tenantId = tenantOf(request);
      const { id, deliveryId } = request.params;
      bodyOf(noBody, request.body, {});
      const queued = await once(request, () => deliveries.redeliver(tenantId, id, deliveryId));
      return reply.redirect(
        `/portal/endpoints/${encodeURIComponent(id)}/deliveries/${encodeURIComponent(queued.deliveryId)}?done=redelivered`,
        303,
      );
    },
  );

  // A GET: the dry run changes nothing, so read-only sessions may try filters too.
  app.get<{ Params: { id: string }; Querystring: Form }>(
    '/endpoints/:id/filter-test',
    async (request, reply) => {
      const tenantId = tenantOf(request);
      const { id } = request.params;
      const subscription = await webhooks.get(tenantId, id);
      const text = request.query.filter;
      const input = bodyOf<FilterTestInput>(
        filterTestBody,
        request.query,
        { filter: field.json('filter') },
        { fixed: { subscriptionId: id } },
      );
      const result = await services.dryRuns.testFilter(tenantId, input);
      return sendPage(
        reply,
        filterTestPage(view(request, reply), subscription, {
          text: typeof text === 'string' ? text : '',
          result,
        }),
      );
    },
  );

  // A POST (code is too long for a query string), yet a dry run: read-only sessions may send it
  // (see DRY_RUNS in portal.ts).
  app.post<IdParams>('/endpoints/:id/transformation-test', async (request, reply) => {
    const tenantId = tenantOf(request);
    const { id } = request.params;
    const subscription = await webhooks.get(tenantId, id);
    const code = typeof request.body.code === 'string' ? request.body.code : '';
    const input = bodyOf<TransformationTestInput>(
      transformationTestBody,
      request.body,
      { code: field.script('code') },
      { fixed: { subscriptionId: id } },
    );
    const result = await services.dryRuns.testTransformation(tenantId, input);
    return sendPage(
      reply,
      transformationTestPage(view(request, reply), subscription, { code, result }),
    );
  });

  app.get<{ Params: { id: string }; Querystring: { after?: string } }>(
    '/endpoints/:id/events',
    async (request, reply) => {
      const tenantId = tenantOf(request);
      const after = Number(request.query.after ?? 0);
      if (!Number.isSafeInteger(after) || after < 0) {
        throw fieldError('after', 'must be a sequence: a whole number from 0');
      }
      const subscription = await webhooks.get(tenantId, request.params.id);
      const page = await deliveries.ledger(tenantId, request.params.id, { after, limit: 50 });
      return sendPage(
        reply,
        ledgerPage(view(request, reply), subscription, after, page.data, page.meta.hasMore),
      );
    },
  );
};

function oneOf(value: string | undefined, allowed: readonly string[]): string | undefined {
  return value !== undefined && allowed.includes(value) ? value : undefined;
}
