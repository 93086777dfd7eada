import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { MAX_URL_LENGTH } from '../../domain/address-guard.ts';
import { DateTime, StringEnum } from '../../domain/schema-kit.ts';
import { SUBSCRIBABLE_EVENT_TYPES } from '../../domain/states.ts';
import { TRANSFORMATION_LIMITS } from '../../domain/transformation.ts';
import { callerOf } from '../pipeline/auth.ts';
import {
  DataOf,
  IdempotencyHeaders,
  IdParams,
  OPTIONAL_BODY,
  ok,
  problems,
  Query,
} from '../schemas.ts';
import {
  ClientCertificateBody,
  MaxConcurrency,
  MaxPerSecond,
  PropagateTraceContext,
  ReceiverAuth,
  ReceiverHeaders,
  SubscriptionFilter,
  SubscriptionOrdering,
  SubscriptionPayload,
  SubscriptionRetrySchedule,
  SubscriptionTransformation,
  WebhookSubscription,
} from '../webhook-schemas.ts';
import type { RouteOptions } from './options.ts';

const SigningKey = Type.String({
  pattern: '^whsec_[A-Za-z0-9_-]{32,}$',
  description:
    'Shown only in this response. `Service-Signature` v1 = hex HMAC-SHA256 keyed by this whole string over `<t>.<raw body>` (Stripe-compatible); the part after `whsec_` is base64 (44 letters and digits), the key Standard Webhooks verifiers decode. Keys made before that form are 43 base64url characters.',
  examples: ['whsec_kQ3vY8pZr2Tn6Wb1Lx9Cf4Hs7Dg0Mj5Ve2Ua8Ro3Ni6T'],
});

const WebhookUrl = Type.String({
  maxLength: MAX_URL_LENGTH,
  description:
    'An HTTPS endpoint, or a broker: `amqps://user:pass@host[:port]/vhost?exchange=<name>&routingKey=<key>` (RabbitMQ) or `tls://user:pass@host[:port]?subject=<subject>` (NATS JetStream); plaintext `amqp://` and `nats://` only where the instance allows private targets. Every address the host resolves to must be public (private, loopback, link-local and CGNAT addresses are refused). A host that does not resolve within `WEBHOOK_DNS_TIMEOUT` (2 s by default) is 422 too. A broker password is never shown back: reads show `***`, and a PATCH that sends the URL with `***` keeps the stored password (for the same user, host and port).',
});

const WebhookEvents = Type.Array(StringEnum(SUBSCRIBABLE_EVENT_TYPES), {
  minItems: 1,
  maxItems: SUBSCRIBABLE_EVENT_TYPES.length * 4,
  description: 'Event types from the catalog; `webhook.test` is not subscribable.',
});

const StandardWebhooks = Type.Boolean({
  description:
    'Also send the Standard Webhooks headers (`webhook-id`, `webhook-timestamp`, `webhook-signature`), verifiable with the same signing key by the `standardwebhooks` libraries. Default false.',
});

const AsymmetricSignatures = Type.Boolean({
  description:
    'Also sign with an Ed25519 key pair (`v1a` in `webhook-signature`): the receiver verifies with the subscription `publicKey` and holds no secret that can sign. Needs `standardWebhooks: true` (422 otherwise). Default false; turning it off drops the pair, on again makes a new one.',
});

export const CreateWebhookBody = Type.Object(
  {
    url: WebhookUrl,
    events: WebhookEvents,
    standardWebhooks: Type.Optional(StandardWebhooks),
    asymmetricSignatures: Type.Optional(AsymmetricSignatures),
    maxConcurrency: Type.Optional(MaxConcurrency),
    maxPerSecond: Type.Optional(MaxPerSecond),
    ordering: Type.Optional(SubscriptionOrdering),
    propagateTraceContext: Type.Optional(PropagateTraceContext),
    filter: Type.Optional(SubscriptionFilter),
    payload: Type.Optional(SubscriptionPayload),
    transformation: Type.Optional(SubscriptionTransformation),
    retrySchedule: Type.Optional(SubscriptionRetrySchedule),
    headers: Type.Optional(ReceiverHeaders),
    auth: Type.Optional(ReceiverAuth),
    clientCertificate: Type.Optional(ClientCertificateBody),
  },
  { additionalProperties: false },
);

export const UpdateWebhookBody = Type.Object(
  {
    url: Type.Optional(WebhookUrl),
    events: Type.Optional(WebhookEvents),
    standardWebhooks: Type.Optional(StandardWebhooks),
    asymmetricSignatures: Type.Optional(AsymmetricSignatures),
    maxConcurrency: Type.Optional(MaxConcurrency),
    maxPerSecond: Type.Optional(MaxPerSecond),
    ordering: Type.Optional(SubscriptionOrdering),
    propagateTraceContext: Type.Optional(PropagateTraceContext),
    filter: Type.Optional(SubscriptionFilter),
    payload: Type.Optional(SubscriptionPayload),
    transformation: Type.Optional(SubscriptionTransformation),
    retrySchedule: Type.Optional(SubscriptionRetrySchedule),
    headers: Type.Optional(ReceiverHeaders),
    auth: Type.Optional(ReceiverAuth),
    clientCertificate: Type.Optional(ClientCertificateBody),
    active: Type.Optional(
      Type.Boolean({
        description:
          '`true` re-enables a paused subscription (failure counters cleared; its pending deliveries resume); `false` pauses it (pending deliveries stay pending).',
      }),
    ),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const TestWebhookBody = Type.Object(
  {
    subscriptionId: Type.Optional(
      Type.String({ description: 'Only this subscription; omitted: every active one.' }),
    ),
    eventType: Type.Optional(
      StringEnum(SUBSCRIBABLE_EVENT_TYPES, {
        description:
          'Send a sample of this event type (realistic data, ids that name no real row) instead of `webhook.test`. Its envelope has `"test": true` like every test event.',
      }),
    ),
  },
  { additionalProperties: false },
);

/** An event a dry run takes instead of a subscription's ledger. */
const DryRunEvent = (what: string) =>
  Type.Object(
    {
      type: StringEnum(SUBSCRIBABLE_EVENT_TYPES, { description: 'The event type.' }),
      data: Type.Record(Type.String(), Type.Unknown(), {
        description: 'The event data, as a delivery carries it.',
      }),
    },
    { additionalProperties: false, description: what },
  );

export const FilterTestBody = Type.Object(
  {
    filter: SubscriptionFilter,
    event: Type.Optional(DryRunEvent('An event to match the filter against.')),
    subscriptionId: Type.Optional(
      Type.String({
        maxLength: 64,
        description: "Match the filter against this subscription's last 50 ledger events instead.",
      }),
    ),
  },
  { additionalProperties: false },
);

export const TransformationTestBody = Type.Object(
  {
    code: Type.String({
      minLength: 1,
      maxLength: TRANSFORMATION_LIMITS.codeBytes,
      description:
        'The transformation to try, as `transformation.code` takes it (a fault is 422 on `code`).',
    }),
    event: Type.Optional(
      DryRunEvent(
        `An event to run it over: a full body with id \`evt_dry_run\`, no sequence, \`created\` now, to the URL \`https://receiver.example/webhooks\`.`,
      ),
    ),
    subscriptionId: Type.Optional(
      Type.String({
        maxLength: 64,
        description:
          "Run it over this subscription's last 50 ledger events instead, each as its delivery would go now (its URL, body form and authentication).",
      }),
    ),
  },
  { additionalProperties: false },
);

const TransformedRequest = Type.Object(
  {
    payload: Type.Unknown({
      description: 'The body that would be sent (and signed): this value as JSON.',
      examples: [{ message: 'Confirmed: BK-4HQ8ZD, Ana Lima' }],
    }),
    url: Type.String({ description: 'Where it would be sent.' }),
    headers: Type.Record(Type.String(), Type.String(), {
      description: 'The headers the transformation adds (names in lower case), besides ours.',
    }),
    cancel: Type.Boolean({ description: 'Nothing would be sent; the attempt would succeed.' }),
  },
  { additionalProperties: false, description: 'The request as the delivery would send it.' },
);

const DryRunError = Type.String({
  description: "The attempt's `responseBody` had it failed with `transformation_failed`.",
});

const TransformationTestResult = Type.Union([
  Type.Object({ result: TransformedRequest }, { additionalProperties: false }),
  Type.Object({ error: DryRunError }, { additionalProperties: false }),
  Type.Object(
    {
      events: Type.Array(
        Type.Object(
          {
            id: Type.String({ description: 'The event id.' }),
            type: Type.String({ description: 'The event type.' }),
            sequence: Type.Integer({ minimum: 1, description: 'Its place in the ledger.' }),
            result: Type.Optional(TransformedRequest),
            error: Type.Optional(DryRunError),
          },
          { additionalProperties: false },
        ),
        { description: 'With a subscriptionId: its last 50 ledger events, oldest first.' },
      ),
    },
    { additionalProperties: false },
  ),
]);

const FilterTestResult = Type.Object(
  {
    matches: Type.Boolean({
      description: 'Whether the filter takes the event; with a subscriptionId, any of its events.',
    }),
    events: Type.Optional(
      Type.Array(
        Type.Object(
          {
            id: Type.String({ description: 'The event id.' }),
            type: Type.String({ description: 'The event type.' }),
            sequence: Type.Integer({ minimum: 1, description: 'Its place in the ledger.' }),
            matches: Type.Boolean({ description: 'Whether the filter takes it.' }),
          },
          { additionalProperties: false },
        ),
        {
          description:
            'With a subscriptionId: its last 50 ledger events, oldest first (what its filter of the time let through).',
        },
      ),
    ),
  },
  { additionalProperties: false },
);

export const webhookRoutes: FastifyPluginAsyncTypebox<RouteOptions> = async (
  app,
  { services, writes },
) => {
  app.get(
    '/webhooks',
    {
      config: { scope: 'webhooks:read' },
      schema: {
        operationId: 'listWebhooks',
        tags: ['Webhook endpoints'],
        summary: 'List webhook subscriptions, newest first (deleted ones included, inactive)',
        description:
          'Every subscription of the tenant, with its delivery health (`consecutiveFailures`, `lastSuccessAt`, `lastFailureAt`). The signing key is never shown again. Scope `webhooks:read`.',
        querystring: Query({}),
        response: {
          200: ok(
            Type.Object(
              { data: Type.Array(Type.Ref(WebhookSubscription)) },
              { additionalProperties: false },
            ),
            'Every subscription of the tenant.',
          ),
          ...problems(401, 403, 422, 429),
        },
      },
    },
    async (request) => ({ data: await services.webhooks.list(callerOf(request).tenant.id) }),
  );

  app.get(
    '/webhooks/:id',
    {
      config: { scope: 'webhooks:read' },
      schema: {
        operationId: 'getWebhook',
        tags: ['Webhook endpoints'],
        summary: 'Get one subscription (a deleted one too, inactive)',
        description:
          "The subscription as the list shows it. Another tenant's or an unknown id is 404. Scope `webhooks:read`.",
        params: IdParams,
        response: {
          200: ok(DataOf(Type.Ref(WebhookSubscription)), 'The subscription.'),
          ...problems(401, 403, 404, 422, 429),
        },
      },
    },
    async (request) => ({
      data: await services.webhooks.get(callerOf(request).tenant.id, request.params.id),
    }),
  );

  app.post(
    '/webhooks',
    {
      config: { scope: 'webhooks:write' },
      schema: {
        operationId: 'createWebhook',
        tags: ['Webhook endpoints'],
        summary: 'Subscribe an HTTPS endpoint to events',
        description:
          '403 `forbidden` with `code` `feature_off_for_tier` when the plan has no webhooks, `webhook_quota_exceeded` when the endpoint cap is full.',
        headers: IdempotencyHeaders,
        body: CreateWebhookBody,
        response: {
          201: ok(
            Type.Object(
              { data: Type.Ref(WebhookSubscription), signingKey: SigningKey },
              { additionalProperties: false },
            ),
            'The subscription and its signing key (shown only here).',
          ),
          ...problems(401, 403, 409, 422, 429),
        },
      },
    },
    async (request, reply) => {
      const tenantId = callerOf(request).tenant.id;
      // Resolving the URL is no database work: it comes before the unit of work.
      const target = await services.webhooks.checkTarget(tenantId, request.body.url);
      return writes.run(request, reply, async () => {
        const created = await services.webhooks.create(tenantId, request.body, target);
        return {
          status: 201,
          body: { data: created.subscription, signingKey: created.signingKey },
        };
      });
    },
  );

  app.patch(
    '/webhooks/:id',
    {
      config: { scope: 'webhooks:write' },
      schema: {
        operationId: 'updateWebhook',
        tags: ['Webhook endpoints'],
        summary: 'Change a subscription: URL, events, headers, flow control, pause or enable',
        description:
          'Any of the members; what is not given stays. A new `url` is checked as at creation (422). `active: true` re-enables a paused subscription, `active: false` pauses it. `maxConcurrency`, `maxPerSecond` and `ordering` apply from the next claim; `propagateTraceContext` from the next attempt. `standardWebhooks: true` with a signing key made before the Standard Webhooks form is 409 `conflict` with `code` `signing_key_rotation_required`: rotate the key first. A deleted subscription is 404. Scope `webhooks:write`.',
        headers: IdempotencyHeaders,
        params: IdParams,
        body: UpdateWebhookBody,
        response: {
          200: ok(DataOf(Type.Ref(WebhookSubscription)), 'The subscription as it is now.'),
          ...problems(401, 403, 404, 409, 422, 429),
        },
      },
    },
    async (request, reply) => {
      const tenantId = callerOf(request).tenant.id;
      const { url } = request.body;
      // Resolving a new URL is no database work: it comes before the unit of work.
      const target = url === undefined ? undefined : await services.webhooks.checkUrl(url);
      return writes.run(request, reply, async () => ({
        status: 200,
        body: {
          data: await services.webhooks.update(tenantId, request.params.id, request.body, target),
        },
      }));
    },
  );

  app.delete(
    '/webhooks/:id',
    {
      config: { scope: 'webhooks:write' },
      schema: {
        operationId: 'deleteWebhook',
        tags: ['Webhook endpoints'],
        summary: 'Delete a subscription (soft: it stays listed, inactive, with its deliveries)',
        description:
          'Stops deliveries at once; pending ones are never sent. A second delete is 404. Scope `webhooks:write`.',
        headers: IdempotencyHeaders,
        params: IdParams,
        response: {
          204: { type: 'null', description: 'Deleted.' },
          ...problems(401, 403, 404, 409, 422, 429),
        },
      },
    },
    async (request, reply) => {
      const tenantId = callerOf(request).tenant.id;
      return writes.run(request, reply, async () => {
        await services.webhooks.remove(tenantId, request.params.id);
        return { status: 204 };
      });
    },
  );

  app.post(
    '/webhooks/:id/rotate-key',
    {
      config: { scope: 'webhooks:write' },
      schema: {
        operationId: 'rotateWebhookKey',
        tags: ['Webhook endpoints'],
        summary: 'Replace the signing key; the old one keeps signing for 24 hours',
        description:
          "Returns the new key once. For `WEBHOOK_KEY_OVERLAP` (24 h) deliveries also carry a `v1` signature by the key retired now (`legacySigningKeyExpiresAt`), the new key's first, so receivers can switch keys without dropping events; a key retired by an earlier rotation keeps signing until its own promised expiry. Scope `webhooks:write`.",
        headers: IdempotencyHeaders,
        params: IdParams,
        response: {
          200: ok(
            Type.Object(
              {
                data: Type.Ref(WebhookSubscription),
                signingKey: SigningKey,
                legacySigningKeyExpiresAt: DateTime,
              },
              { additionalProperties: false },
            ),
            'The new key (shown only here); deliveries carry two `v1=` values until the old one expires.',
          ),
          ...problems(401, 403, 404, 409, 422, 429),
        },
      },
    },
    async (request, reply) => {
      const tenantId = callerOf(request).tenant.id;
      return writes.run(request, reply, async () => {
        const rotated = await services.webhooks.rotateKey(tenantId, request.params.id);
        return {
          status: 200,
          body: {
            data: rotated.subscription,
            signingKey: rotated.signingKey,
            legacySigningKeyExpiresAt: rotated.legacySigningKeyExpiresAt,
          },
        };
      });
    },
  );

  app.post(
    '/webhooks/filters/test',
    {
      config: { scope: 'webhooks:read' },
      schema: {
        operationId: 'testWebhookFilter',
        tags: ['Webhook endpoints'],
        summary: 'Dry-run a payload filter',
        description:
          "Whether `filter` takes `event`; or, given a `subscriptionId` instead, which of that subscription's last 50 ledger events it would have taken (deleted subscriptions included). Nothing is stored or sent. A malformed filter is 422 keyed `filter.<path inside the filter>`, as when it is set; 404 for an unknown subscription. Scope `webhooks:read`.",
        headers: IdempotencyHeaders,
        body: FilterTestBody,
        response: {
          200: ok(DataOf(FilterTestResult), 'How the filter matched.'),
          ...problems(401, 403, 404, 409, 422, 429),
        },
      },
    },
    // Keyed like every POST: a retried dry run with its key gets the first answer.
    async (request, reply) => {
      const tenantId = callerOf(request).tenant.id;
      return writes.run(request, reply, async () => ({
        status: 200,
        body: { data: await services.dryRuns.testFilter(tenantId, request.body) },
      }));
    },
  );

  app.post(
    '/webhooks/transformations/test',
    {
      config: { scope: 'webhooks:read' },
      schema: {
        operationId: 'testWebhookTransformation',
        tags: ['Webhook endpoints'],
        summary: 'Dry-run a transformation',
        description:
          "What `code` makes of `event`; or, given a `subscriptionId` instead, of each of that subscription's last 50 ledger events (deleted subscriptions included), as its deliveries would go at this second: each `result` (the body, URL and headers that would be sent, or `cancel`) or `error` (what the attempt would record with `transformation_failed`). Nothing is stored or sent. Code that does not compile, defines no `handler` or is too large is 422 on `code`; 404 for an unknown subscription. Scope `webhooks:read`.",
        headers: IdempotencyHeaders,
        body: TransformationTestBody,
        response: {
          200: ok(DataOf(TransformationTestResult), 'What the transformation makes of them.'),
          ...problems(401, 403, 404, 409, 422, 429),
        },
      },
    },
    async (request, reply) => {
      const tenantId = callerOf(request).tenant.id;
      return writes.run(request, reply, async () => ({
        status: 200,
        body: { data: await services.dryRuns.testTransformation(tenantId, request.body) },
      }));
    },
  );

  app.post(
    '/webhooks/test',
    {
      config: { scope: 'webhooks:write' },
      // The body is optional: no body means "every active subscription".
      preValidation: async (request) => {
        request.body ??= {};
      },
      schema: {
        operationId: 'testWebhooks',
        tags: ['Webhook endpoints'],
        summary: 'Fire a test event',
        description:
          'A `webhook.test` event, or with `eventType` a sample of that type, to one subscription or to every active one whatever its events list. Test events carry `"test": true` in their envelope and change none of the subscription\'s counters. 404 for an unknown or deleted subscription, 422 for a paused one or for an `eventType` that is not a subscribable type.',
        headers: IdempotencyHeaders,
        body: TestWebhookBody,
        [OPTIONAL_BODY]: true,
        response: {
          200: ok(
            DataOf(
              Type.Object(
                {
                  eventId: Type.String({ format: 'uuid' }),
                  deliveries: Type.Integer({ description: 'Delivery rows created.' }),
                },
                { additionalProperties: false },
              ),
            ),
            'Fired.',
          ),
          ...problems(401, 403, 404, 409, 422, 429),
        },
      },
    },
    async (request, reply) => {
      const tenantId = callerOf(request).tenant.id;
      return writes.run(request, reply, async () => ({
        status: 200,
        body: { data: await services.deliveries.fireTest(tenantId, request.body) },
      }));
    },
  );
};
