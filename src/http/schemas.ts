import { type Static, type TProperties, type TSchema, type TUnsafe, Type } from '@sinclair/typebox';
import { ATTEMPT_ERROR_CLASSES, DELIVERY_ERRORS } from '../domain/attempts.ts';
import { DEFAULT_MAX_CONCURRENCY, MAX_CONCURRENCY, ORDERINGS } from '../domain/flow-control.ts';
import {
  BOOKING_STATUSES,
  CLIENT_KINDS,
  DELIVERY_STATUSES,
  PAUSE_REASONS,
  PAYMENT_MODES,
  PAYMENT_STATUSES,
  PRICING_DISPLAY_MODES,
  SUBSCRIBABLE_EVENT_TYPES,
  TRANSPORT_MODES,
  TRIP_STATUSES,
} from '../domain/states.ts';
import { PROBLEM_EXAMPLES } from './reference/examples.ts';

/**
 * `type: [T, "null"]` rather than anyOf: OpenAPI 3.1 reads it the same, and fast-json-stringify
 * serializes it without trying alternatives at run time.
 */
export function Nullable<T extends TSchema>(schema: T): TUnsafe<Static<T> | null> {
  const { type, ...rest } = schema as unknown as { type: string; enum?: unknown[] };
  // An enum must list null too, or no null passes it.
  if (rest.enum) rest.enum = [...rest.enum, null];
  return Type.Unsafe<Static<T> | null>({ ...rest, type: [type, 'null'] });
}

/** A string enum as `{type: string, enum}` (TypeBox unions of literals become anyOf). */
export function StringEnum<const T extends readonly string[]>(values: T, options: object = {}) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });
}

export const DateTime = Type.String({ format: 'date-time' });
export const NullableDateTime = Nullable(DateTime);
/** An instant: ISO 8601 in UTC with milliseconds, as every time this API returns. */
const At = (description: string) =>
  Nullable(Type.String({ format: 'date-time', description: `${description} UTC.` }));
const Text = (description: string) => Nullable(Type.String({ description }));
const Cents = (description: string) =>
  Type.Integer({ description: `${description}, in minor units (cents) of \`currency\`.` });
const CurrencyCode = Type.String({ minLength: 3, maxLength: 3, description: 'ISO 4217.' });
export const NullableString = Nullable(Type.String());
export const CalendarDate = Type.String({
  pattern: '^\\d{4}-\\d{2}-\\d{2}$',
  description: 'Calendar date, YYYY-MM-DD.',
  examples: ['2027-05-01'],
});
export const Email = Type.String({ format: 'email', maxLength: 320 });

export const Meta = Type.Object(
  {
    cursor: Nullable(Type.String({ description: 'Pass as `cursor` to get the next page.' })),
    hasMore: Type.Boolean({ description: 'True when another page follows.' }),
  },
  { $id: 'PageMeta', additionalProperties: false },
);

export const PageQuery = {
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 50, description: 'Page size, 1-100.' }),
  cursor: Type.String({ description: '`meta.cursor` of the previous page.' }),
};

/** A query string schema: every member optional, unknown members rejected (422). */
export function Query<T extends TProperties>(properties: T) {
  return Type.Partial(Type.Object(properties), { additionalProperties: false });
}

/** Documents the Idempotency-Key of writes (checked by the idempotency hook before validation). */
export const IdempotencyHeaders = Type.Object({
  // Spelled as documented; Fastify matches header names case-insensitively.
  'Idempotency-Key': Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 255,
      description:
        'Makes the write safe to retry for 24 hours: the first answer (2xx or 4xx) is replayed byte for byte with `Idempotency-Replayed: true`. A UUID v4 per logical operation is recommended.',
    }),
  ),
});

export const IdParams = Type.Object({ id: Type.String() });

export const Trip = Type.Object(
  {
    id: Type.String(),
    tripNumber: Type.String({ description: 'Per-tenant reference; not a counter.' }),
    title: Type.String(),
    status: StringEnum(TRIP_STATUSES, {
      description: 'Set by the operator console (admin API); new trips are `draft`.',
    }),
    tripMode: StringEnum(['tailor_made', 'template'], {
      description: '`tailor_made` for one client, `template` to be copied.',
    }),
    dateMode: StringEnum(['departure_based', 'range_based'], {
      description: 'Fixed departures, or any start within a range.',
    }),
    publicSlug: Text('Storefront path segment; set at the first publication, then kept.'),
    publishedAt: At('When it was (last) published; null if never.'),
    unpublishedAt: At('Set when taken off the storefront; null while published.'),
    startDate: At('First day, as midnight'),
    endDate: At('Last day, as midnight; null when open-ended.'),
    daysCount: Type.Integer({ description: 'Length of the trip in days, 1-365.' }),
    startCityId: Text("A city of the tenant's library."),
    endCityId: Text("A city of the tenant's library."),
    transportMode: StringEnum(TRANSPORT_MODES),
    pricingDisplayMode: StringEnum(PRICING_DISPLAY_MODES),
    shortDescription: NullableString,
    longDescription: NullableString,
    clientId: Text('The client it is made for, if any.'),
    notes: Text('Internal notes of the operator; never shown on the storefront.'),
    createdAt: At('Created at'),
    updatedAt: At('Last changed at'),
  },
  { $id: 'Trip', additionalProperties: false },
);

export const Booking = Type.Object(
  {
    id: Type.String(),
    bookingNumber: Type.String({ description: 'Per-tenant reference; not a counter.' }),
    tripId: Type.String(),
    tripVersion: Type.Integer({
      description: 'The trip `version` the booking was made on (its snapshot is kept).',
    }),
    status: StringEnum(BOOKING_STATUSES, {
      description: 'Moved by checkout and the payment processor; see the `booking.*` events.',
    }),
    totalRetailCents: Cents('Price paid by the traveller'),
    applicationFeeCents: Cents('Platform fee taken from the total'),
    currency: CurrencyCode,
    travelerName: NullableString,
    travelerEmail: NullableString,
    confirmedAt: At('When it was first confirmed.'),
    cancelledAt: At('When it was cancelled.'),
    departureId: Text('The storefront departure booked, for departure-based trips.'),
    departureStartDate: At('First day of the departure, as midnight'),
    departureEndDate: At('Last day of the departure, as midnight'),
    createdAt: At('Created at'),
    updatedAt: At('Last changed at'),
  },
  { $id: 'Booking', additionalProperties: false },
);

export const Payment = Type.Object(
  {
    id: Type.String(),
    bookingId: Type.String(),
    mode: StringEnum(PAYMENT_MODES, { description: 'How the booking is being paid.' }),
    status: StringEnum(PAYMENT_STATUSES, {
      description: 'Moved by the payment processor; see `payment.succeeded` and `payment.failed`.',
    }),
    label: Type.String({ description: 'Shown to the traveller, e.g. "Deposit 30%".' }),
    amountCents: Cents('Amount'),
    currency: CurrencyCode,
    scheduledFor: At('When an instalment is due.'),
    chargedAt: At('When it succeeded.'),
    isDeposit: Type.Boolean({ description: 'True for the first payment of a booking.' }),
    paymentRail: Text("The processor's rail, e.g. `card`, `sepa_debit`."),
    kind: Type.String({ description: "The processor's payment kind, e.g. `deposit`, `balance`." }),
  },
  { $id: 'Payment', additionalProperties: false },
);

export const Client = Type.Object(
  {
    id: Type.String(),
    kind: StringEnum(CLIENT_KINDS, { description: 'A person or a company.' }),
    displayName: Type.String({ description: 'How the operator refers to the client.' }),
    legalName: Text('Name for invoices, for companies.'),
    email: NullableString,
    phone: NullableString,
    countryIso: Text('ISO 3166-1 alpha-2, upper-case.'),
    language: Text('Preferred language (a BCP 47 tag such as `pt` or `en-GB`).'),
    currency: Text('Preferred currency, ISO 4217, upper-case.'),
    vatId: Text('VAT identification number, for invoices.'),
    tags: Type.Array(Type.String(), { description: 'Free labels of the operator.' }),
    notes: Text('Internal notes of the operator.'),
    archivedAt: At('Set while archived (the `archived` filter).'),
    createdAt: At('Created at'),
    updatedAt: At('Last changed at'),
  },
  { $id: 'Client', additionalProperties: false },
);

const stamps = {
  createdAt: Type.String({ format: 'date-time', description: 'Created at, UTC.' }),
  updatedAt: Type.String({ format: 'date-time', description: 'Last changed at, UTC.' }),
};

export const LibraryItems = {
  cities: Type.Object(
    { id: Type.String(), name: Type.String(), countryIso: Text('ISO 3166-1 alpha-2.'), ...stamps },
    { $id: 'City', additionalProperties: false },
  ),
  hotels: Type.Object(
    {
      id: Type.String(),
      name: Type.String(),
      cityId: Text('A city of the same catalog.'),
      stars: Nullable(Type.Integer({ description: 'Hotel rating, 1 to 5.' })),
      address: NullableString,
      ...stamps,
    },
    { $id: 'Hotel', additionalProperties: false },
  ),
  activities: Type.Object(
    {
      id: Type.String(),
      name: Type.String(),
      cityId: Text('A city of the same catalog.'),
      durationMinutes: Nullable(Type.Integer({ description: 'Length, in minutes.' })),
      description: NullableString,
      ...stamps,
    },
    { $id: 'Activity', additionalProperties: false },
  ),
  vehicles: Type.Object(
    {
      id: Type.String(),
      name: Type.String(),
      kind: NullableString,
      seats: Nullable(Type.Integer({ description: 'Passenger seats.' })),
      ...stamps,
    },
    { $id: 'Vehicle', additionalProperties: false },
  ),
  guides: Type.Object(
    {
      id: Type.String(),
      name: Type.String(),
      languages: Type.Array(Type.String(), { description: 'Languages guided in (BCP 47 tags).' }),
      email: NullableString,
      phone: NullableString,
      ...stamps,
    },
    { $id: 'Guide', additionalProperties: false },
  ),
};

const Problem = Type.Object(
  {
    type: Type.String({ format: 'uri', description: 'Stable identifier; branch on this.' }),
    title: Type.String({ description: 'Short summary of the problem type.' }),
    status: Type.Integer({ description: 'The HTTP status.' }),
    detail: Type.String({ description: 'What went wrong with this request.' }),
    code: Type.Optional(
      Type.String({
        description: 'Finer cause, e.g. `invalid_transition`, `trip_quota_exceeded`.',
      }),
    ),
    errors: Type.Optional(
      Type.Record(Type.String(), Type.Array(Type.String()), {
        description: 'Field path (`title`, `tags.3`) to messages; on validation-failed.',
      }),
    ),
    required_scope: Type.Optional(
      Type.String({ description: 'On `scope-required`: the scope to mint a token with.' }),
    ),
    required_plans: Type.Optional(
      Type.Array(Type.String(), { description: 'On `plan-required`: plans with API access.' }),
    ),
    current_plan: Type.Optional(
      Type.String({ description: "On `plan-required`: the tenant's plan." }),
    ),
    next: Type.Optional(
      Type.Object(
        { checkoutUrl: Type.String({ format: 'uri' }) },
        { description: 'On `booking-create-not-supported`: where to send the traveller.' },
      ),
    ),
    firstSequence: Type.Optional(
      Type.Integer({
        description:
          'On `events_expired`: the first sequence kept after the ones retention removed.',
      }),
    ),
    from: Type.Optional(
      Type.String({ description: 'On `invalid_transition`: the state the resource is in.' }),
    ),
    allowed: Type.Optional(
      Type.Array(Type.String(), {
        description:
          'On `invalid_transition`: the states reachable from `from` (empty when it is final).',
      }),
    ),
    requestId: Type.Optional(Type.String({ description: 'Quote it when reporting a 500.' })),
  },
  {
    $id: 'Problem',
    additionalProperties: true,
    description: 'RFC 7807 problem document (application/problem+json).',
  },
);

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
    maximum: 1000,
    description:
      'Most attempts to the endpoint in any one-second window (sliding), 1-1000, over every worker process; sends are evenly spaced. null (the default) for none.',
  }),
);

/** A subscription's delivery order (set at creation or by PATCH). */
export const SubscriptionOrdering = StringEnum(ORDERINGS, {
  description:
    '`none` (the default): deliveries go as they fall due. `per_object`: at most one delivery per object in flight (the `bookingId` of booking, dispute and payment events, the `tripId` of trip events, the `clientId` of client events), in `sequence` order; a retry holds back the later events of its object only. A dead-lettered one lets the next go: the gap shows in `sequence`.',
});

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
    deliveryState: Type.Object(
      {
        concurrencyLimit: Type.Integer({
          minimum: 1,
          maximum: MAX_CONCURRENCY,
          description:
            'Attempts in flight at once now. Starts at 4; grows by 1 when the endpoint answers a 2xx in time with the whole limit in use, up to `maxConcurrency`; halves on a 429, 502, 503, 504, a time-out or a refused or reset connection.',
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
          '`timeout`, `connection_refused`, `connection_reset` (any other failure of the connection too), `dns`, `tls`, `address_blocked` (refused before connecting), `redirect` (a 3xx; not followed), `body_too_large` (the answer went past 64 KiB and was cut), `internal` (a failure on our side before or during the attempt); for a broker destination also `broker_refused` (a nack, an unroutable message, an unknown exchange or stream, refused credentials) and `broker_busy` (the broker pushes back: a blocked connection, JetStream 429 or 503); null when the status tells all.',
      }),
    ),
    responseBody: Type.String({
      description:
        "The first KiB of the response body, as text; empty when none arrived. A broker destination: the broker's words on a failure, JetStream's ack (`stream`, `seq`, `duplicate`) on success.",
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
  },
  { $id: 'WebhookAttempt', additionalProperties: false },
);

/** Shared schemas registered once on the app, so routes and the OpenAPI document `$ref` them. */
/** A webhook portal link (public and admin APIs). */
export const PortalSession = Type.Object(
  {
    url: Type.String({
      format: 'uri',
      description:
        'Open it in a browser within 10 minutes. It works once: its first use signs that browser in for 1 hour (a cookie bound to the tenant) and lands on the endpoint list. Treat it like a password until then.',
    }),
    expiresAt: Type.String({
      format: 'date-time',
      description: 'When the link stops working if unused. UTC.',
    }),
  },
  { $id: 'PortalSession', additionalProperties: false },
);

export const PortalSessionBody = Type.Object(
  {
    readOnly: Type.Optional(
      Type.Boolean({
        description:
          'The session sees everything and changes nothing (the server refuses every change). Default false.',
      }),
    ),
  },
  { additionalProperties: false },
);

export const SHARED_SCHEMAS = [
  Meta,
  Trip,
  Booking,
  Payment,
  Client,
  WebhookSubscription,
  WebhookDelivery,
  WebhookAttempt,
  PortalSession,
  Problem,
  ...Object.values(LibraryItems),
];

export const DataOf = <T extends TSchema>(schema: T) =>
  Type.Object({ data: schema }, { additionalProperties: false });

export const PageOf = <T extends TSchema>(schema: T) =>
  Type.Object({ data: Type.Array(schema), meta: Type.Ref(Meta) }, { additionalProperties: false });

/** Headers on every response; @fastify/swagger lifts `headers` into the OpenAPI response. */
const COMMON_HEADERS = {
  'Service-Request-Id': {
    type: 'string',
    description: "The request's own Service-Request-Id, echoed, or one generated for it.",
  },
};

/** Sent on every authenticated answer: the token's sustained window. */
const RATE_LIMIT_HEADERS = {
  'X-RateLimit-Limit': { type: 'integer', description: 'Requests allowed per minute (sustained).' },
  'X-RateLimit-Remaining': { type: 'integer', description: 'Requests left in the current minute.' },
  'X-RateLimit-Reset': { type: 'integer', description: 'Seconds until the window refreshes.' },
};

/** A success response: its schema (which also serializes it), a description and its headers. */
export function ok<T extends TSchema>(schema: T, description: string): T {
  return { ...schema, description, headers: { ...COMMON_HEADERS, ...RATE_LIMIT_HEADERS } };
}

function problemHeaders(status: number) {
  if (status === 401) {
    return { ...COMMON_HEADERS, 'WWW-Authenticate': { type: 'string', const: 'Bearer' } };
  }
  if (status === 429 || status === 503) {
    return {
      ...COMMON_HEADERS,
      'Retry-After': { type: 'integer', minimum: 1, description: 'Seconds to wait.' },
    };
  }
  return COMMON_HEADERS;
}

const PROBLEM_DESCRIPTIONS: Record<number, string> = {
  401: 'Token missing, malformed, unknown, revoked or expired (`unauthorized`).',
  403: 'Missing scope (`scope-required`), plan without API access (`plan-required`) or quota full (`forbidden`).',
  404: 'Not found, or owned by another tenant (`not-found`).',
  409: 'State clash (`conflict`), or the Idempotency-Key was used for another request (`idempotency-key-reuse`) or its first request is still running (`idempotency-in-progress`).',
  422: 'Bad JSON, wrong Content-Type, oversized body or a field failing its schema (`validation-failed`).',
  429: "Rate limited (`rate-limited`): the token's burst (per second) or sustained (per minute) limit, or the per-IP guard, then also `X-RateLimit-Scope: ip`. Wait `Retry-After` seconds.",
  500: 'Internal fault (`internal`); quote `Service-Request-Id`.',
  501: 'Not implemented (`booking-create-not-supported`).',
  503: 'A dependency (the database) is unreachable or did not answer in time (`service-unavailable`). Retry after `Retry-After` seconds, with the same Idempotency-Key for writes.',
};

/**
 * Response entries for the problem statuses a route can answer; any route can fault (500) or
 * find its database unavailable (503).
 */
export function problems(...statuses: number[]) {
  return Object.fromEntries(
    [...statuses, 500, 503].map((status) => [
      status,
      {
        description: PROBLEM_DESCRIPTIONS[status] ?? 'Problem',
        headers: problemHeaders(status),
        content: {
          'application/problem+json': {
            schema: Type.Ref(Problem),
            example: PROBLEM_EXAMPLES[status],
          },
        },
      },
    ]),
  );
}

/**
 * Marks a route whose body may be left out (Fastify itself needs a body schema to validate one
 * that is sent); `markOptionalBodies` turns it into `requestBody.required: false`.
 */
export const OPTIONAL_BODY = 'x-optional-body';

type OpenApiOperation = Record<string, unknown> & { requestBody?: { required?: boolean } };

/** @fastify/swagger's transformObject: @fastify/swagger marks every request body required. */
export function markOptionalBodies<T extends { paths?: object }>(document: T): T {
  for (const item of Object.values(document.paths ?? {}) as Array<object | undefined>) {
    for (const operation of Object.values(item ?? {}) as OpenApiOperation[]) {
      if (typeof operation !== 'object' || operation === null || !(OPTIONAL_BODY in operation)) {
        continue;
      }
      delete operation[OPTIONAL_BODY];
      if (operation.requestBody) operation.requestBody.required = false;
    }
  }
  return document;
}

/**
 * Drops component schemas the document never references: every shared schema is registered on
 * the whole app, but the admin document uses only some of them.
 */
export function pruneUnusedSchemas<
  T extends { components?: { schemas?: Record<string, unknown> } },
>(document: T): T {
  const schemas = document.components?.schemas;
  if (!schemas) return document;
  const refsIn = (value: unknown) =>
    new Set(
      [...JSON.stringify(value).matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)].map(
        (match) => match[1],
      ),
    );
  // Reachable from outside the components, then from what is reachable, until nothing is added.
  const { components, ...rest } = document;
  const used = refsIn(rest);
  for (let grew = true; grew; ) {
    grew = false;
    for (const name of [...used]) {
      for (const inner of refsIn(schemas[name])) {
        if (!used.has(inner)) {
          used.add(inner);
          grew = true;
        }
      }
    }
  }
  for (const name of Object.keys(schemas)) if (!used.has(name)) delete schemas[name];
  return document;
}

/** A client as the public API and the admin API create one. */
export const CreateClientBody = Type.Object(
  {
    kind: StringEnum(CLIENT_KINDS),
    displayName: Type.String({ minLength: 1, maxLength: 200 }),
    legalName: Type.Optional(Type.String({ maxLength: 200 })),
    email: Type.Optional(Email),
    phone: Type.Optional(Type.String({ maxLength: 40 })),
    countryIso: Type.Optional(
      Type.String({
        format: 'country-code',
        pattern: '^[A-Za-z]{2}$',
        description: 'ISO 3166-1 alpha-2, either case; stored upper-case.',
      }),
    ),
    language: Type.Optional(Type.String({ maxLength: 20 })),
    currency: Type.Optional(
      Type.String({
        format: 'currency-code',
        pattern: '^[A-Za-z]{3}$',
        description: 'ISO 4217, either case; stored upper-case.',
      }),
    ),
    vatId: Type.Optional(Type.String({ maxLength: 40 })),
    notes: Type.Optional(Type.String({ maxLength: 2000 })),
    tags: Type.Optional(Type.Array(Type.String({ maxLength: 40 }), { maxItems: 20 })),
  },
  { additionalProperties: false },
);
