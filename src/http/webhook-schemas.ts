import { Type } from '@sinclair/typebox';
import { ATTEMPT_ERROR_CLASSES, DELIVERY_ERRORS } from '../domain/attempts.ts';
import { durationText } from '../domain/durations.ts';
import {
  ADAPTIVE_LIMIT_RULE,
  DEFAULT_MAX_CONCURRENCY,
  MAX_CONCURRENCY,
  MAX_PER_SECOND,
  ORDERINGS,
} from '../domain/flow-control.ts';
import { FILTER_LIMITS } from '../domain/payload-filter.ts';
import { SECRET_MASK } from '../domain/redaction.ts';
import { RETRY_SCHEDULE_LIMITS } from '../domain/retry-schedule.ts';
import { At, Nullable, StringEnum, Text } from '../domain/schema-kit.ts';
import { DELIVERY_STATUSES, PAUSE_REASONS, SUBSCRIBABLE_EVENT_TYPES } from '../domain/states.ts';
import { PAYLOAD_FORMS } from '../domain/thin-payload.ts';
import { TRANSFORMATION_LIMITS } from '../domain/transformation.ts';

/** The webhook objects of the API: subscriptions, deliveries, attempts, and their settings. */

/** A subscription's ceiling on attempts in flight at once (set at creation or by PATCH). */
export const MaxConcurrency = Type.Integer({
  minimum: 1,
  maximum: MAX_CONCURRENCY,
  description: `Most attempts in flight to the endpoint at once, 1-${MAX_CONCURRENCY}; the adaptive limit (\`deliveryState.concurrencyLimit\`) moves below it. Default ${DEFAULT_MAX_CONCURRENCY}.`,
});

/** Whether deliveries carry the attempt's trace context (POST, PATCH). */
export const PropagateTraceContext = Type.Boolean({
  description:
    "Deliveries carry the W3C `traceparent` (and `tracestate`) of the attempt's span when the server exports traces; never `baggage`. Default false.",
});

/** A subscription's cap on deliveries a second (set at creation or by PATCH). */
export const MaxPerSecond = Nullable(
  Type.Integer({
    minimum: 1,
    maximum: MAX_PER_SECOND,
    description: `Most attempts to the endpoint in any one-second window (sliding), 1-${MAX_PER_SECOND}, over every worker process; sends are evenly spaced. null (the default) for none.`,
  }),
);

/** A subscription's delivery order (set at creation or by PATCH). */
export const SubscriptionOrdering = StringEnum(ORDERINGS, {
  description:
    '`none` (the default): deliveries go as they fall due. `per_object`: at most one delivery per object in flight (the `bookingId` of booking, dispute and payment events, the `tripId` of trip events, the `clientId` of client events), in `sequence` order; a retry holds back the later events of its object only. A dead-lettered one lets the next go: the gap shows in `sequence`.',
});

/** The form of a subscription's bodies (set at creation or by PATCH). */
export const SubscriptionPayload = StringEnum(PAYLOAD_FORMS, {
  description:
    "`full` (the default): each body carries the event's whole `data`. `thin`: `data` carries only the members of the full `data` named `…Id` and `changed`, the names of the members the change moved (`[]` on a creation); no values, no `object`, so no personal data. Fetch the full body with `GET /api/v1/events/{id}`. Filters and `per_object` ordering still judge the full event; the signature covers the thin body as sent. Applies from the next attempt, redeliveries included. See [Personal data](#description/personal-data).",
});

/** A subscription's payload filter (set at creation or by PATCH; the dry run takes one too). */
export const SubscriptionFilter = Nullable(
  Type.Record(Type.String(), Type.Unknown(), {
    description: `Which events of its types the subscription takes: keys are paths into the event body (\`type\`, \`data.<member>[.<member>…]\`), each with a JSON scalar (equality) or an object of operators that must all hold: \`$eq\`, \`$neq\`, \`$in\`, \`$nin\` (arrays of scalars), \`$gt\`, \`$gte\`, \`$lt\`, \`$lte\` (a number, or an ISO 8601 date-time compared as an instant), \`$exists\` (boolean), \`$prefix\` (string); \`$and\` and \`$or\` take arrays of such objects. \`$neq\` and \`$nin\` also match a missing member. At most ${FILTER_LIMITS.conditions} conditions, ${FILTER_LIMITS.depth} levels, ${FILTER_LIMITS.bytes} bytes as JSON; a fault is 422 keyed \`filter.<path inside the filter>\`. An event it refuses gets no delivery and no \`sequence\`, and is not noted as missed while paused; test fires ignore it. null (the default) takes every event. See [Payload filters](#description/payload-filters).`,
    examples: [{ 'data.currency': 'EUR', 'data.amountCents': { $gte: 10000 } }],
  }),
);

/** A subscription's transformation (set at creation or by PATCH). */
export const SubscriptionTransformation = Nullable(
  Type.Object(
    {
      code: Type.String({
        minLength: 1,
        maxLength: TRANSFORMATION_LIMITS.codeBytes,
        description: `JavaScript defining \`function handler(webhook)\`, at most ${TRANSFORMATION_LIMITS.codeBytes / 1024} KB. Code that does not compile or defines no \`handler\` is 422 on \`transformation.code\`, with the compiler's message and line.`,
        examples: [
          "function handler(webhook) {\n  webhook.payload = { text: webhook.type + ': ' + webhook.payload.id };\n  return webhook;\n}",
        ],
      }),
    },
    {
      additionalProperties: false,
      description: `Reshapes each delivery before it is signed and sent. \`handler(webhook)\` is given \`{type, payload, url, headers}\` (\`payload\`: the body the subscription would get; \`headers\`: \`{}\`) and returns it changed: any JSON \`payload\` (sent as the body, and signed), up to ${TRANSFORMATION_LIMITS.headers} extra \`headers\` (never ours, Standard Webhooks', hop-by-hop, \`content-…\` or \`user-agent\`; \`authorization\` only without \`auth\`), another HTTPS \`url\` (the address guard checks it at every send; on the subscription's origin while it has receiver authentication), or \`cancel: true\` (nothing is sent; the attempt succeeds and the attempt log shows \`cancelled\`). It runs in a sandbox with no I/O, no timers, a clock that reads the delivery's \`created\` and no \`Math.random\`, for at most ${TRANSFORMATION_LIMITS.runMs} ms and ${TRANSFORMATION_LIMITS.memoryBytes / 1024 / 1024} MB a run; a run that throws, runs out or returns something invalid fails the attempt with \`errorClass\` \`transformation_failed\` (its message in \`responseBody\`), retried like any failure. Try it first with \`POST /api/v1/webhooks/transformations/test\`. null (the default) for none. See [Transformations](#description/transformations).`,
    },
  ),
);

/** A subscription's own retry schedule (set at creation or by PATCH). */
export const SubscriptionRetrySchedule = Nullable(
  Type.Array(Type.String({ maxLength: 20 }), {
    minItems: 1,
    maxItems: RETRY_SCHEDULE_LIMITS.waits,
    description: `The waits between this subscription's attempts, in place of the deployment's schedule: 1 to ${RETRY_SCHEDULE_LIMITS.waits} durations (a whole number and \`s\`, \`m\` or \`h\`: \`"30s"\`, \`"5m"\`, \`"2h"\`), each from ${durationText(RETRY_SCHEDULE_LIMITS.minMs)} to ${durationText(RETRY_SCHEDULE_LIMITS.maxMs)}; attempts = waits + 1, then the delivery is dead-lettered. A \`Retry-After\` later than the wait still wins. Applies from the next attempt. null (the default): the deployment's schedule (the reference's webhooks say it).`,
    examples: [['10s', '1m', '10m', '1h']],
  }),
);

/** Extra request headers of an HTTPS subscription (create, PATCH; reads mask the values). */
export const ReceiverHeaders = Nullable(
  Type.Record(Type.String(), Type.String({ maxLength: 4096 }), {
    description:
      "Up to 10 extra request headers every attempt carries, for a gateway in front of the receiver (an API key, say). Values are stored sealed and shown as `***` in every read; in a PATCH, `***` keeps the stored value of that name while the URL keeps its origin. Names are refused when they are ours (`Service-…`), Standard Webhooks' (`webhook-…`), hop-by-hop, `host`, `content-…`, `user-agent`, trace context, or `authorization` while `auth` is set. `null` or `{}` removes them. HTTPS endpoints only.",
    examples: [{ 'x-api-key': 'k_live_3f9a1c' }],
  }),
);

const MASKED_SECRET =
  'Stored sealed; `***` in every read. In a PATCH, `***` keeps the stored one while the URL keeps its origin';

const BasicAuthBody = Type.Object(
  {
    type: Type.Literal('basic', { description: 'HTTP Basic (RFC 7617).' }),
    username: Type.String({ minLength: 1, maxLength: 200, description: 'No `:`.' }),
    password: Type.String({ minLength: 1, maxLength: 1000, description: `${MASKED_SECRET}.` }),
  },
  { additionalProperties: false, title: 'Basic' },
);

const OAuth2Fields = {
  type: Type.Literal('oauth2_client_credentials', {
    description:
      "An OAuth2 access token by the client credentials grant (RFC 6749 section 4.4), sent as `Authorization: Bearer`. The worker fetches one from `tokenUrl` (client authentication by HTTP Basic), keeps it until shortly before `expires_in`, and on a 401 from the receiver fetches a new one once before counting the attempt failed. A token server that refuses or cannot be reached fails the attempt with `errorClass` `auth_failed`; its refusal (a 4xx) counts toward auto-pause as a receiver 4xx does. The attempt's `responseBody` keeps only the RFC 6749 `error` and `error_description` of a refusal; in it, and in any receiver answer, every form of a credential sent (plain, URL-encoded, base64 in Basic) reads `***`.",
  }),
  tokenUrl: Type.String({
    maxLength: 2048,
    description:
      'The token endpoint: HTTPS, checked by the same address guard as the subscription URL.',
  }),
  clientId: Type.String({ minLength: 1, maxLength: 500 }),
  scope: Type.Optional(Type.String({ minLength: 1, maxLength: 1000 })),
  audience: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 1000,
      description: 'Sent as `audience` (Auth0, Okta and others ask for it).',
    }),
  ),
};

const OAuth2Body = Type.Object(
  {
    ...OAuth2Fields,
    clientSecret: Type.String({
      minLength: 1,
      maxLength: 2000,
      description: `${MASKED_SECRET} and its tokenUrl.`,
    }),
  },
  { additionalProperties: false, title: 'OAuth2 client credentials' },
);

/** An HTTPS subscription's authentication scheme (create, PATCH). */
export const ReceiverAuth = Type.Union([BasicAuthBody, OAuth2Body, Type.Null()], {
  description:
    'How each attempt authenticates to the receiver: `{type: "basic", username, password}`, or `{type: "oauth2_client_credentials", tokenUrl, clientId, clientSecret, scope?, audience?}`. `null` (the default) for none. HTTPS endpoints only.',
});

/** A TLS client certificate for an HTTPS subscription (create, PATCH). */
export const ClientCertificateBody = Nullable(
  Type.Object(
    {
      certificate: Type.String({
        maxLength: 16_384,
        description: 'PEM: the certificate presented, then any intermediates it needs.',
      }),
      privateKey: Type.String({
        maxLength: 16_384,
        description: 'PEM, unencrypted (PKCS#8, PKCS#1 or SEC1). Stored sealed; never shown.',
      }),
    },
    {
      additionalProperties: false,
      description:
        'A certificate every attempt presents to the receiver (mutual TLS). A certificate that has expired or does not match its key is 422. Reads show its `subject`, `notAfter` and `fingerprint256`; one expiring within 14 days is counted in `/metrics`. `null` removes it. HTTPS endpoints only.',
    },
  ),
);

const Masked = Type.Literal(SECRET_MASK, { description: 'Never shown.' });

/** `auth` as reads show it: the scheme, its secret `***`. */
const ReceiverAuthShown = Type.Union(
  [
    Type.Object(
      { type: Type.Literal('basic'), username: Type.String(), password: Masked },
      { additionalProperties: false, title: 'Basic' },
    ),
    Type.Object(
      { ...OAuth2Fields, clientSecret: Masked },
      { additionalProperties: false, title: 'OAuth2 client credentials' },
    ),
    Type.Null(),
  ],
  { description: 'The scheme, its secret `***`; null for none.' },
);

export const WebhookSubscription = Type.Object(
  {
    id: Type.String(),
    url: Type.String({
      description:
        'HTTPS endpoint, or broker (`amqps://`, `tls://`), that receives events; a broker password shows as `***`.',
    }),
    events: Type.Array(StringEnum(SUBSCRIBABLE_EVENT_TYPES), {
      description: 'Subscribed event types.',
    }),
    active: Type.Boolean({ description: 'False while paused, and once deleted.' }),
    pausedAt: At('When it was paused or deleted; cleared when re-enabled.'),
    pauseReason: Nullable(
      StringEnum(PAUSE_REASONS, {
        description:
          'Why it is not active: `manual` (`PATCH` with `active: false`), `consecutive_failures` (the auto-pause rule), `gone` (its receiver answered 410 Gone), `deleted`. Null while active.',
      }),
    ),
    consecutiveFailures: Type.Integer({ description: 'Failed attempts in a row; 0 after a 2xx.' }),
    lastSuccessAt: At('Last 2xx answer.'),
    lastFailureAt: At('Last failed attempt.'),
    last24h: Type.Object(
      {
        succeeded: Type.Integer({ minimum: 0, description: 'Delivered (a 2xx).' }),
        deadLettered: Type.Integer({ minimum: 0, description: 'Given up after the last attempt.' }),
        pending: Type.Integer({
          minimum: 0,
          description: 'Waiting for an attempt or a retry, or being attempted.',
        }),
      },
      {
        additionalProperties: false,
        description:
          'Deliveries created in the last 24 hours, by where they stand now; test fires (and their redeliveries) are not counted.',
      },
    ),
    asymmetricSignatures: Type.Boolean({
      description:
        '`webhook-signature` also carries a `v1a` Ed25519 signature per live key pair, verifiable with `publicKey` alone (Standard Webhooks asymmetric signatures).',
    }),
    publicKey: Nullable(
      Type.String({
        pattern: '^whpk_[A-Za-z0-9+/]{43}=$',
        description:
          'The Ed25519 public key that verifies `v1a` signatures: `whpk_` + the base64 of its raw 32 bytes. A rotation makes a new pair (the old one keeps signing for the overlap). Null when `asymmetricSignatures` is off.',
      }),
    ),
    standardWebhooks: Type.Boolean({
      description:
        'Deliveries also carry the Standard Webhooks headers `webhook-id`, `webhook-timestamp` and `webhook-signature` (`v1,<base64>` per signing key, space separated), verifiable with the same signing key string.',
    }),
    maxConcurrency: MaxConcurrency,
    maxPerSecond: MaxPerSecond,
    ordering: SubscriptionOrdering,
    propagateTraceContext: Type.Boolean({
      description:
        "When the server exports traces (OpenTelemetry), deliveries carry the W3C `traceparent` (and `tracestate`) of the attempt's own span, so the receiver's trace continues it; never `baggage`. Default false.",
    }),
    filter: SubscriptionFilter,
    payload: SubscriptionPayload,
    transformation: SubscriptionTransformation,
    retrySchedule: SubscriptionRetrySchedule,
    headers: Type.Record(Type.String(), Type.String(), {
      description: 'The extra request headers, each value `***`; `{}` for none.',
    }),
    auth: ReceiverAuthShown,
    clientCertificate: Nullable(
      Type.Object(
        {
          subject: Type.String({ description: 'Its subject, as `CN=…, O=…`.' }),
          notAfter: Type.String({ format: 'date-time', description: 'When it expires.' }),
          fingerprint256: Type.String({ description: 'SHA-256 fingerprint, hex pairs.' }),
        },
        {
          additionalProperties: false,
          description: 'The TLS client certificate presented; null for none.',
        },
      ),
    ),
    deliveryState: Type.Object(
      {
        concurrencyLimit: Type.Integer({
          minimum: 1,
          maximum: MAX_CONCURRENCY,
          description: `Attempts in flight at once now. ${ADAPTIVE_LIMIT_RULE}`,
        }),
        inFlight: Type.Integer({ minimum: 0, description: 'Attempts in flight now.' }),
        pausedUntil: At(
          'Until when the endpoint asked us to wait (`Retry-After` on a 429 or 503, at most an hour): no attempt goes to it before. Null when not held.',
        ),
        reason: Nullable(
          StringEnum(['paused', 'deleted', 'retry_after', 'backpressure'] as const, {
            description:
              'What holds deliveries back: `paused` or `deleted` (none go), `retry_after` (until `pausedUntil`), `backpressure` (its answers cut `concurrencyLimit`, which grows back as it answers in time). Null when nothing does.',
          }),
        ),
      },
      {
        additionalProperties: false,
        description: 'How deliveries flow to the endpoint now, and what holds them back.',
      },
    ),
    createdAt: At('Created at'),
  },
  {
    $id: 'WebhookSubscription',
    additionalProperties: false,
    description: 'The signing key is never part of this object on reads.',
  },
);

export const WebhookDelivery = Type.Object(
  {
    id: Type.String({ description: 'First half of `Service-Request-Id`.' }),
    eventId: Type.String({ description: 'The `Service-Event-Id`; shared by redeliveries.' }),
    eventType: Type.String({ description: 'The event type; the body `type`.' }),
    status: StringEnum(DELIVERY_STATUSES, {
      description: '`pending` also between attempts (see `nextAttemptAt`).',
    }),
    attempts: Type.Integer({
      description:
        'HTTP attempts made so far (one cut off by a crash of ours is sent again under the same number).',
    }),
    lastResponseStatus: Nullable(
      Type.Integer({
        description:
          'Last HTTP status the endpoint answered with (the body is not kept); an attempt that got no answer (time-out, connection failure) leaves it as it was; null until the first answer.',
      }),
    ),
    nextAttemptAt: At('When the next attempt is due, while `pending`.'),
    deliveredAt: At('When a 2xx arrived.'),
    claimedAt: At('When the running attempt started, while `in_flight`.'),
    redeliveredFromId: Text('The delivery this one redelivers, if any.'),
    sequence: Nullable(
      Type.Integer({
        minimum: 1,
        description:
          "The event's place in this subscription's ledger (body member `sequence`, header `Service-Event-Sequence`); a redelivery keeps its original's; null for test fires and deliveries from before sequences existed.",
      }),
    ),
    lastError: Nullable(
      StringEnum(DELIVERY_ERRORS, {
        description:
          'Why the last attempt got no usable answer (see the attempts); null after a 2xx, before any attempt, or when `lastResponseStatus` tells all. `worker_lost`: dead-lettered because its attempts kept dying with their worker (an attempt cut off by a crash is sent again, never counted as made).',
      }),
    ),
    createdAt: At('Queued at'),
  },
  { $id: 'WebhookDelivery', additionalProperties: false },
);

export const WebhookAttempt = Type.Object(
  {
    id: Type.String(),
    attempt: Type.Integer({ minimum: 1, description: 'Attempt number of the delivery, from 1.' }),
    startedAt: Type.String({ format: 'date-time', description: 'When the POST began, UTC.' }),
    durationMs: Type.Integer({
      minimum: 0,
      description: 'From connecting to the end of the answer (or the failure), in milliseconds.',
    }),
    status: Nullable(
      Type.Integer({
        description:
          'The HTTP status answered; null when none arrived. A broker destination: 200 when the broker acknowledged the message (a publisher confirm, a stream ack), else null.',
      }),
    ),
    errorClass: Nullable(
      StringEnum(ATTEMPT_ERROR_CLASSES, {
        description:
          '`timeout`, `connection_refused`, `connection_reset` (any other failure of the connection too), `dns`, `tls`, `address_blocked` (refused before connecting), `redirect` (a 3xx; not followed), `body_too_large` (the answer went past 64 KiB and was cut), `internal` (a failure on our side before or during the attempt); for a broker destination also `broker_refused` (a nack, an unroutable message, an unknown exchange or stream, refused credentials) and `broker_busy` (the broker pushes back: a blocked connection, JetStream 429 or 503); `auth_failed` when the OAuth2 token server of the subscription refused or could not be reached (nothing was sent to the receiver; `responseBody` says why); `transformation_failed` when the transformation of the subscription threw, ran out of time or memory, or returned something that cannot be sent (nothing was sent; `responseBody` has its message; counted toward auto-pause as a refusal); null when the status tells all.',
      }),
    ),
    responseBody: Type.String({
      description:
        "The first KiB of the response body, as text (an invalid UTF-8 byte or a NUL as U+FFFD); empty when none arrived. A broker destination: the broker's words on a failure, JetStream's ack (`stream`, `seq`, `duplicate`) on success.",
    }),
    retryAfter: Nullable(
      Type.String({
        maxLength: 100,
        description:
          'The `Retry-After` of a 429 or 503 answer, as received; a valid one held every delivery to the endpoint until then (at most an hour). Null otherwise.',
      }),
    ),
    concurrencyLimit: Nullable(
      Type.Integer({
        minimum: 1,
        description:
          "The subscription's concurrency limit when this attempt was sent (see `deliveryState`).",
      }),
    ),
    cancelled: Type.Boolean({
      description:
        "The subscription's transformation cancelled it (`cancel: true`): nothing was sent, and the delivery succeeded; `status` is null.",
    }),
  },
  { $id: 'WebhookAttempt', additionalProperties: false },
);

/** Shared schemas registered once on the app, so routes and the OpenAPI document `$ref` them. */
