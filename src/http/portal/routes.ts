import Ajv, { type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { DeliveryStatus } from '../../db/schema.ts';
import {
  DELIVERY_STATUSES,
  SUBSCRIBABLE_EVENT_TYPES,
  type SubscribableEventType,
} from '../../domain/states.ts';
import { ApiProblem, fieldError } from '../../lib/problems.ts';
import type { Services } from '../../services/index.ts';
import type { PortalSession } from '../../services/portal-service.ts';
import type {
  CreateSubscriptionInput,
  UpdateSubscriptionInput,
} from '../../services/webhooks-service.ts';
import { toProblem } from '../pipeline/problem-reply.ts';
import { CreateWebhookBody, UpdateWebhookBody } from '../routes/webhooks-routes.ts';
import { sendPage } from './layout.ts';
import {
  catalogPage,
  deliveryPage,
  endpointPage,
  endpointsPage,
  ledgerPage,
  newEndpointPage,
  signingKeyPage,
  type View,
} from './pages.ts';

export interface PortalPagesOptions {
  services: Services;
  view: (request: FastifyRequest, reply: FastifyReply) => View;
  /** Runs a change once per rendered form (see `once` in portal.ts). */
  once: <T>(request: FastifyRequest, work: () => Promise<T>) => Promise<T>;
}

/** The API's own body schemas judge the forms, with its messages (no coercion: see below). */
const ajv = addFormats.default(new Ajv.default({ allErrors: true, strict: false }));
const createBody = ajv.compile(CreateWebhookBody);
const updateBody = ajv.compile(UpdateWebhookBody);

type Form = Record<string, string | string[] | undefined>;
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
  redelivered: 'Queued again as this new delivery.',
};

const text = (value: unknown) => (typeof value === 'string' ? value : undefined);
const doneOf = (query: { done?: string }) => (query.done ? (DONE[query.done] ?? null) : null);

/** The signed-in pages and the changes their forms post. */
export const portalPages: FastifyPluginAsync<PortalPagesOptions> = async (
  app,
  { services, view, once },
) => {
  const tenantOf = (request: FastifyRequest) => (request.portal as PortalSession).tenantId;
  const webhooks = services.webhooks;

  app.get('/', async (request, reply) =>
    sendPage(reply, endpointsPage(view(request, reply), await webhooks.list(tenantOf(request)))),
  );

  app.get('/catalog', async (request, reply) => sendPage(reply, catalogPage(view(request, reply))));

  app.get('/endpoints/new', async (request, reply) =>
    sendPage(reply, newEndpointPage(view(request, reply))),
  );

  app.post<{ Body: Form }>('/endpoints', async (request, reply) => {
    const tenantId = tenantOf(request);
    const input = checked<CreateSubscriptionInput>(createBody, subscriptionForm(request.body));
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
      const deliveries = await webhooks.listDeliveries(tenantId, id, {
        status: status as DeliveryStatus | undefined,
        eventType,
        cursor: request.query.cursor || undefined,
        limit: 25,
      });
      return sendPage(
        reply,
        endpointPage(view(request, reply), {
          subscription,
          deliveries,
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
    const input = checked<UpdateSubscriptionInput>(updateBody, subscriptionForm(request.body));
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
      await once(request, () => webhooks.update(tenantId, request.params.id, { active }));
      return back(reply, request.params.id, active ? 'enabled' : 'paused');
    });
  }

  app.post<IdParams>('/endpoints/:id/delete', async (request, reply) => {
    const tenantId = tenantOf(request);
    await once(request, () => webhooks.remove(tenantId, request.params.id));
    return back(reply, request.params.id, 'deleted');
  });

  app.post<IdParams>('/endpoints/:id/rotate-key', async (request, reply) => {
    const tenantId = tenantOf(request);
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
    const eventType = oneOf(text(request.body.eventType), SUBSCRIBABLE_EVENT_TYPES);
    if (eventType === undefined) throw fieldError('eventType', 'choose an event type of the list');
    await once(request, () =>
      webhooks.fireTest(tenantId, {
        subscriptionId: request.params.id,
        eventType: eventType as SubscribableEventType,
      }),
    );
    return back(reply, request.params.id, 'test');
  });

  app.post<IdParams>('/endpoints/:id/recover', async (request, reply) => {
    const tenantId = tenantOf(request);
    const since = instantOf(text(request.body.since), text(request.body.tzOffset));
    await once(request, () => webhooks.recover(tenantId, request.params.id, { since }));
    return back(reply, request.params.id, 'recovered');
  });

  app.get<{ Params: { id: string; deliveryId: string }; Querystring: { done?: string } }>(
    '/endpoints/:id/deliveries/:deliveryId',
    async (request, reply) => {
      const tenantId = tenantOf(request);
      const { id, deliveryId } = request.params;
      const subscription = await webhooks.get(tenantId, id);
      const { delivery, eventData } = await webhooks.getDelivery(tenantId, id, deliveryId);
      const attempts = await webhooks.listAttempts(tenantId, id, deliveryId, { limit: 100 });
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
      const queued = await once(request, () => webhooks.redeliver(tenantId, id, deliveryId));
      return reply.redirect(
        `/portal/endpoints/${encodeURIComponent(id)}/deliveries/${encodeURIComponent(queued.deliveryId)}?done=redelivered`,
        303,
      );
    },
  );

  app.get<{ Params: { id: string }; Querystring: { after?: string } }>(
    '/endpoints/:id/events',
    async (request, reply) => {
      const tenantId = tenantOf(request);
      const after = Number(request.query.after ?? 0);
      if (!Number.isSafeInteger(after) || after < 0) {
        throw fieldError('after', 'must be a sequence: a whole number from 0');
      }
      const subscription = await webhooks.get(tenantId, request.params.id);
      const page = await webhooks.ledger(tenantId, request.params.id, { after, limit: 50 });
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

/** A subscription form as the API's JSON body (the same schema then validates it). */
function subscriptionForm(form: Form): Record<string, unknown> {
  const number = (value: string | undefined) => (value === undefined ? undefined : Number(value));
  const maxPerSecond = text(form.maxPerSecond);
  return {
    url: text(form.url),
    events: [form.events ?? []].flat(),
    standardWebhooks: form.standardWebhooks === 'true',
    maxConcurrency: number(text(form.maxConcurrency) || undefined),
    maxPerSecond: maxPerSecond === undefined || maxPerSecond === '' ? null : Number(maxPerSecond),
    ordering: text(form.ordering) || undefined,
  };
}

/** The body as the API's schema validates it (what is undefined dropped), or its 422. */
function checked<T>(validate: ValidateFunction, body: Record<string, unknown>): T {
  const value = Object.fromEntries(Object.entries(body).filter(([, v]) => v !== undefined));
  if (validate(value)) return value as T;
  const problem = toProblem(
    Object.assign(new Error('invalid form'), { validation: validate.errors }),
  );
  throw problem ?? new ApiProblem('validation-failed', 'The form is invalid.');
}

/** A `datetime-local` value read in the browser's zone (`tzOffset`: its getTimezoneOffset). */
function instantOf(local: string | undefined, tzOffset: string | undefined): string {
  const match = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?$/.exec(local ?? '');
  const offset = Number(tzOffset ?? 0);
  if (!match || !Number.isInteger(offset) || Math.abs(offset) > 24 * 60) {
    throw fieldError('since', 'must be a date and time');
  }
  const [, y, mo, d, h, mi, s] = match;
  const utc = Date.UTC(+y, +mo - 1, +d, +h, +mi, +(s ?? 0)) + offset * 60_000;
  if (Number.isNaN(utc)) throw fieldError('since', 'must be a date and time');
  return new Date(utc).toISOString();
}
