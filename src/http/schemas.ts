import { type TProperties, type TSchema, Type } from '@sinclair/typebox';
import { Booking, Client, NullableString, Payment, Trip } from '../domain/resources.ts';
import { Nullable, StringEnum, Text } from '../domain/schema-kit.ts';
import { CLIENT_KINDS } from '../domain/states.ts';
import { PROBLEM_EXAMPLES } from './reference/examples.ts';
import { WebhookAttempt, WebhookDelivery, WebhookSubscription } from './webhook-schemas.ts';

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
