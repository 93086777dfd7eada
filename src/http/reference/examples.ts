/**
 * Realistic examples for the OpenAPI documents: one per shared schema (`examples` on the component,
 * which renderers show), and the composition of media examples for every body and response from
 * them (`addMediaExamples`). `test/openapi.test.ts` validates every example against its schema.
 */

import { PLANS_WITH_API } from '../../domain/plans.ts';
import { TRIP_TRANSITIONS } from '../../domain/states.ts';
import { invalidTransition } from '../../lib/problems.ts';
import { DRY_RUN_REQUESTS, DRY_RUN_RESPONSES, SUBSCRIPTION } from './dry-run-examples.ts';

const CITY_LISBON = 'cty_01JD3X5Q8M4V2RZK7N9T6WBHCE';
const CITY_PORTO = 'cty_01JD3X5QB2T7YHK4P8R3M6VDFA';
const TRIP = 'trp_01JD3X7E9P2QK5VN4T8R6MZWYC';
const BOOKING = 'bkg_01JD3XA4F7R2N8QK6T5V9MWZHB';
const CLIENT = 'cli_01JD3X9C2M7T4RK8V5N6QWZPYD';
const CREATED = '2026-11-02T09:14:27.512Z';
const UPDATED = '2026-11-03T16:40:05.128Z';

const stamps = { createdAt: CREATED, updatedAt: UPDATED };

/** `examples` of each shared schema, by its `$id`. */
const SCHEMA_EXAMPLES: Record<string, unknown> = {
  PageMeta: { cursor: 'dHJpcHM6dHJwXzAxSkQzWDdFOVAyUUs1Vk40VDhSNk1aV1lD', hasMore: true },
  Trip: {
    id: TRIP,
    tripNumber: 'TR-7KX2M9',
    title: 'Lisbon and Porto in spring',
    status: 'active',
    tripMode: 'tailor_made',
    dateMode: 'departure_based',
    publicSlug: 'lisbon-and-porto-in-spring-3f9a2c',
    publishedAt: '2026-11-03T16:40:05.128Z',
    unpublishedAt: null,
    startDate: '2027-04-12T00:00:00.000Z',
    endDate: '2027-04-18T00:00:00.000Z',
    daysCount: 7,
    startCityId: CITY_LISBON,
    endCityId: CITY_PORTO,
    transportMode: 'own_fleet',
    pricingDisplayMode: 'per_person',
    shortDescription: 'Seven days from the Tagus to the Douro.',
    longDescription: null,
    clientId: CLIENT,
    notes: 'Vegetarian meals for two travellers.',
    ...stamps,
  },
  Booking: {
    id: BOOKING,
    bookingNumber: 'BK-4QW8T2',
    tripId: TRIP,
    tripVersion: 3,
    status: 'confirmed',
    totalRetailCents: 249_000,
    applicationFeeCents: 7_470,
    currency: 'EUR',
    travelerName: 'Ana Lima',
    travelerEmail: 'ana.lima@mail.test',
    confirmedAt: '2026-11-05T10:02:44.019Z',
    cancelledAt: null,
    departureId: 'dep-2027-04-12',
    departureStartDate: '2027-04-12T00:00:00.000Z',
    departureEndDate: '2027-04-18T00:00:00.000Z',
    ...stamps,
  },
  Payment: {
    id: 'pay_01JD3XB6N3T8R5K2V7M9QWZCDE',
    bookingId: BOOKING,
    mode: 'deposit_only',
    status: 'succeeded',
    label: 'Deposit 30%',
    amountCents: 74_700,
    currency: 'EUR',
    scheduledFor: null,
    chargedAt: '2026-11-04T08:31:12.650Z',
    isDeposit: true,
    paymentRail: 'card',
    kind: 'deposit',
  },
  Client: {
    id: CLIENT,
    kind: 'individual',
    displayName: 'Ana Lima',
    legalName: null,
    email: 'ana.lima@mail.test',
    phone: '+351 912 345 678',
    countryIso: 'PT',
    language: 'pt',
    currency: 'EUR',
    vatId: null,
    tags: ['repeat', 'spring'],
    notes: null,
    archivedAt: null,
    ...stamps,
  },
  WebhookSubscription: {
    id: SUBSCRIPTION,
    url: 'https://hooks.operator.test/tourops',
    events: ['booking.confirmed', 'payment.succeeded'],
    active: true,
    pausedAt: null,
    pauseReason: null,
    consecutiveFailures: 0,
    lastSuccessAt: '2026-11-05T10:02:45.201Z',
    lastFailureAt: null,
    last24h: { succeeded: 412, deadLettered: 0, pending: 3 },
    standardWebhooks: false,
    asymmetricSignatures: false,
    publicKey: null,
    maxConcurrency: 16,
    maxPerSecond: null,
    ordering: 'none',
    propagateTraceContext: false,
    filter: { 'data.currency': 'EUR' },
    payload: 'full',
    transformation: null,
    retrySchedule: null,
    headers: { 'X-Api-Key': '***' },
    auth: null,
    clientCertificate: null,
    deliveryState: { concurrencyLimit: 16, inFlight: 3, pausedUntil: null, reason: null },
    createdAt: CREATED,
  },
  WebhookDelivery: {
    id: 'dlv_01JD3XD3M8Q5T2R7K9V4NWZBHC',
    eventId: '0b7e8f52-3c1d-4e7a-9f26-5d8c1a4b7e90',
    eventType: 'booking.confirmed',
    status: 'success',
    attempts: 1,
    lastResponseStatus: 200,
    nextAttemptAt: null,
    deliveredAt: '2026-11-05T10:02:45.201Z',
    claimedAt: null,
    redeliveredFromId: null,
    sequence: 42,
    lastError: null,
    createdAt: '2026-11-05T10:02:44.030Z',
  },
  WebhookAttempt: {
    id: 'att_01JD3XD5Q2T8R4K7V9M3NWZBHE',
    attempt: 2,
    startedAt: '2026-11-05T10:03:44.102Z',
    durationMs: 10_004,
    status: null,
    errorClass: 'timeout',
    responseBody: '',
    retryAfter: null,
    concurrencyLimit: 16,
    cancelled: false,
  },
  City: { id: CITY_LISBON, name: 'Lisbon', countryIso: 'PT', ...stamps },
  Hotel: {
    id: 'htl_01JD3X6A4R8T2K5N7V9MQWZCDF',
    name: 'Casa do Rio',
    cityId: CITY_PORTO,
    stars: 4,
    address: 'Rua da Alfândega 12, 4050-029 Porto',
    ...stamps,
  },
  Activity: {
    id: 'act_01JD3X6C7T2R9K4N5V8MQWZBHE',
    name: 'Douro valley wine tasting',
    cityId: CITY_PORTO,
    durationMinutes: 240,
    description: 'Two quintas, lunch included.',
    ...stamps,
  },
  Vehicle: {
    id: 'veh_01JD3X6E2M7Q4T9R5K8NVWZCDA',
    name: 'Mercedes Sprinter 16',
    kind: 'minibus',
    seats: 16,
    ...stamps,
  },
  Guide: {
    id: 'gde_01JD3X6G5R2T8K7N4V9MQWZBHD',
    name: 'João Ferreira',
    languages: ['pt', 'en', 'fr'],
    email: 'joao.ferreira@guides.test',
    phone: '+351 913 222 111',
    ...stamps,
  },
};

const problem = (
  slug: string,
  title: string,
  status: number,
  detail: string,
  extra: Record<string, unknown> = {},
) => ({
  type: `https://api.tourops.test/errors/${slug}`,
  title,
  status,
  detail,
  ...extra,
});

/** The 409 every lifecycle's refused move answers, built as the services build it. */
const REFUSED_MOVE = invalidTransition(TRIP_TRANSITIONS, 'draft', 'sent');

/** One problem body per status a route documents. */
export const PROBLEM_EXAMPLES: Record<number, unknown> = {
  401: problem('unauthorized', 'Unauthorized', 401, 'The bearer token is revoked.'),
  403: problem('scope-required', 'Scope required', 403, 'This token lacks trips:write.', {
    required_scope: 'trips:write',
  }),
  404: problem('not-found', 'Not found', 404, 'Trip not found.'),
  409: problem('conflict', 'Conflict', 409, REFUSED_MOVE.detail, REFUSED_MOVE.extra),
  422: problem('validation-failed', 'Validation failed', 422, 'The request is not valid.', {
    errors: { startDate: ['must be a calendar date (YYYY-MM-DD)'], 'tags.3': ['is too long'] },
  }),
  429: problem('rate-limited', 'Too many requests', 429, 'Rate limit exceeded; retry later.'),
  500: problem('internal', 'Internal error', 500, 'An unexpected error occurred.', {
    requestId: 'req_01JD3XF2K8M5Q7T4R9V6NWZBHC',
  }),
  501: problem(
    'booking-create-not-supported',
    'Booking creation not supported',
    501,
    'Bookings are created through the storefront checkout.',
    {
      next: { checkoutUrl: 'https://shop.tourops.test/checkout/lisbon-and-porto-in-spring-3f9a2c' },
    },
  ),
  503: problem(
    'service-unavailable',
    'Service unavailable',
    503,
    'The database is unavailable; retry after the Retry-After delay.',
  ),
};

/** Request bodies, by operationId: what a client would really send. */
const REQUEST_EXAMPLES: Record<string, unknown> = {
  ...DRY_RUN_REQUESTS,
  createTrip: {
    title: 'Lisbon and Porto in spring',
    startDate: '2027-04-12',
    endDate: '2027-04-18',
    daysCount: 7,
    startCityId: CITY_LISBON,
    endCityId: CITY_PORTO,
    transportMode: 'own_fleet',
    pricingDisplayMode: 'per_person',
    shortDescription: 'Seven days from the Tagus to the Douro.',
    clientId: CLIENT,
  },
  updateTrip: { title: 'Lisbon and Porto, late spring', endDate: null, notes: null },
  createBooking: {
    tripId: TRIP,
    travelerName: 'Ana Lima',
    travelerEmail: 'ana.lima@mail.test',
  },
  createClient: {
    kind: 'company',
    displayName: 'Atlântico Viagens',
    legalName: 'Atlântico Viagens, Lda.',
    email: 'reservas@atlantico.test',
    countryIso: 'PT',
    language: 'pt',
    currency: 'EUR',
    vatId: 'PT509876543',
    tags: ['agency'],
  },
  createWebhook: {
    url: 'https://hooks.operator.test/tourops',
    events: ['booking.confirmed', 'payment.succeeded'],
    filter: { 'data.currency': 'EUR' },
    headers: { 'X-Api-Key': 'k_live_3f9a1c' },
  },
  updateWebhook: {
    events: ['booking.confirmed', 'booking.cancelled'],
    standardWebhooks: true,
    auth: {
      type: 'oauth2_client_credentials',
      tokenUrl: 'https://login.operator.test/oauth2/token',
      clientId: 'tourops-webhooks',
      clientSecret: 'cs_9Qw2xL7vR4tN8pZ3',
      scope: 'webhooks',
    },
  },
  testWebhooks: { subscriptionId: SUBSCRIPTION, eventType: 'booking.confirmed' },
  recoverWebhook: { since: '2026-11-05T00:00:00.000Z', until: '2026-11-06T00:00:00.000Z' },
  adminCreateTenant: { name: 'Atlântico Tours', slug: 'atlantico-tours', tier: 'pro' },
  adminUpdateTenant: { tier: 'enterprise', tripQuota: null },
  adminAddMember: { email: 'ops@atlantico.test', role: 'admin' },
  adminCreateToken: {
    scopes: ['trips:read', 'trips:write', 'webhooks:read', 'webhooks:write'],
    name: 'CRM sync',
    expiresAt: '2027-11-01T00:00:00.000Z',
  },
  adminCreate_cities: { name: 'Porto', countryIso: 'PT' },
  adminCreate_hotels: {
    name: 'Casa do Rio',
    cityId: CITY_PORTO,
    stars: 4,
    address: 'Rua da Alfândega 12, 4050-029 Porto',
  },
  adminCreate_activities: {
    name: 'Douro valley wine tasting',
    cityId: CITY_PORTO,
    durationMinutes: 240,
  },
  adminCreate_vehicles: { name: 'Mercedes Sprinter 16', kind: 'minibus', seats: 16 },
  adminCreate_guides: {
    name: 'João Ferreira',
    languages: ['pt', 'en', 'fr'],
    email: 'joao.ferreira@guides.test',
  },
  adminCreateClient: { kind: 'individual', displayName: 'Ana Lima', countryIso: 'PT' },
  adminTripStatus: { status: 'active' },
  adminCreateBooking: {
    tripId: TRIP,
    totalRetailCents: 249_000,
    currency: 'EUR',
    travelerName: 'Ana Lima',
    travelerEmail: 'ana.lima@mail.test',
    departureStartDate: '2027-04-12',
    departureEndDate: '2027-04-18',
  },
  adminBookingTransition: { to: 'deposit_paid' },
  adminCreatePayment: {
    mode: 'deposit_only',
    label: 'Deposit 30%',
    amountCents: 74_700,
    currency: 'EUR',
    kind: 'deposit',
    paymentRail: 'card',
  },
  adminPaymentTransition: { to: 'processing' },
};

const TENANT = {
  id: 'ten_01JD3X4P6R2T8K5N7V9MQWZCDB',
  name: 'Atlântico Tours',
  slug: 'atlantico-tours',
  tier: 'pro',
  active: true,
  tripQuota: 1000,
  webhookEndpointCap: 10,
};
const TOKEN = {
  id: 'tok_01JD3X4R8T5K2N7V4M9QWZBHCE',
  name: 'CRM sync',
  prefix: 'tk_live_7KX2',
  scopes: ['trips:read', 'trips:write', 'webhooks:read', 'webhooks:write'],
  lastUsedAt: '2026-11-05T10:01:12.334Z',
  expiresAt: '2027-11-01T00:00:00.000Z',
  createdAt: CREATED,
  revoked: false,
};

/** Answers whose schema is not a shared one, by `<operationId> <status>`. */
const RESPONSE_EXAMPLES: Record<string, unknown> = {
  ...DRY_RUN_RESPONSES,
  'getMe 200': {
    tenant: { id: TENANT.id, name: TENANT.name, slug: TENANT.slug, active: true },
    token: TOKEN,
    tier: 'pro',
    env: 'live',
  },
  'redeliverWebhook 202': {
    data: {
      deliveryId: 'dlv_01JD3XE6R2T9K4N8V5M7QWZBHD',
      eventId: '0b7e8f52-3c1d-4e7a-9f26-5d8c1a4b7e90',
      status: 'pending',
    },
  },
  'listWebhookEvents 200': {
    data: [
      {
        id: '0b7e8f52-3c1d-4e7a-9f26-5d8c1a4b7e90',
        type: 'client.created',
        created: 1_793_870_565,
        data: { clientId: CLIENT, kind: 'company', displayName: 'Atlântico Viagens' },
        sequence: 43,
        deliveryStatus: 'dead_letter',
        deliveryId: 'dlv_01JD3XD3M8Q5T2R7K9V4NWZBHC',
      },
    ],
    meta: { hasMore: false },
  },
  'adminCreateTenant 201': { data: TENANT },
  'adminGetTenant 200': { data: TENANT },
  'adminUpdateTenant 200': { data: { ...TENANT, tier: 'enterprise', tripQuota: null } },
  'adminAddMember 201': {
    data: { id: 'mem_01JD3X4Q2M7T5R8K4N9VWZBHCA', email: 'ops@atlantico.test', role: 'admin' },
  },
  'adminListNotifications 200': {
    data: [
      {
        id: 'ntf_01JD3XG4K8M2Q5T7R9V6NWZBHE',
        recipient: 'ops@atlantico.test',
        memberId: 'mem_01JD3X4Q2M7T5R8K4N9VWZBHCA',
        kind: 'webhook_paused',
        subscriptionId: SUBSCRIPTION,
        createdAt: '2026-11-06T03:12:09.871Z',
      },
    ],
  },
  'adminCreateToken 201': {
    data: { ...TOKEN, lastUsedAt: null },
    token: 'tk_live_7KX2M9QW4T8R2N5V6B3C7D9F0H',
  },
  'adminRevokeToken 200': { data: { ...TOKEN, revoked: true } },
};

type Json = Record<string, unknown>;

/**
 * An example built from a schema: a shared schema's own example, else one composed from the
 * parts (`data`, arrays, objects), from an `examples`/`default`/`const`/`enum`, or from the type.
 */
function exampleOf(schema: unknown, components: Record<string, Json>, depth = 0): unknown {
  if (typeof schema !== 'object' || schema === null || depth > 12) return undefined;
  const s = schema as Json;
  if (typeof s.$ref === 'string') {
    const name = s.$ref.split('/').pop() as string;
    return SCHEMA_EXAMPLES[name] ?? exampleOf(components[name], components, depth + 1);
  }
  if (Array.isArray(s.examples) && s.examples.length > 0) return s.examples[0];
  if ('example' in s) return s.example;
  if ('const' in s) return s.const;
  if ('default' in s) return s.default;
  if (Array.isArray(s.enum)) return s.enum[0];
  for (const key of ['anyOf', 'oneOf'] as const) {
    const options = s[key];
    if (Array.isArray(options)) {
      const first = options.find((o) => (o as Json).type !== 'null') ?? options[0];
      return exampleOf(first, components, depth + 1);
    }
  }
  const type = Array.isArray(s.type) ? s.type.find((t) => t !== 'null') : s.type;
  if (type === 'object' || s.properties) {
    const out: Json = {};
    for (const [name, property] of Object.entries((s.properties ?? {}) as Json)) {
      const value = exampleOf(property, components, depth + 1);
      if (value !== undefined) out[name] = value;
    }
    return out;
  }
  if (type === 'array') return [exampleOf(s.items, components, depth + 1)];
  if (type === 'integer' || type === 'number') return typeof s.minimum === 'number' ? s.minimum : 1;
  if (type === 'boolean') return true;
  if (type === 'string') {
    if (s.format === 'date-time') return CREATED;
    if (s.format === 'uuid') return '0b7e8f52-3c1d-4e7a-9f26-5d8c1a4b7e90';
    if (s.format === 'email') return 'ops@operator.test';
    if (s.format === 'uri') return 'https://hooks.operator.test/tourops';
    return 'text';
  }
  return undefined;
}

type Media = { schema?: unknown; example?: unknown; examples?: unknown };
type Operation = {
  operationId?: string;
  requestBody?: { content?: Record<string, Media> };
  responses?: Record<string, { content?: Record<string, Media> }>;
};

/**
 * Gives every request body and response of the document an example: the one its route declares,
 * or one composed from the shared schemas' examples (see exampleOf). Mutates and returns it.
 */
export function addMediaExamples<T extends { paths?: object; components?: object }>(
  document: T,
): T {
  const components = ((document.components as Json | undefined)?.schemas ?? {}) as Record<
    string,
    Json
  >;
  for (const [name, example] of Object.entries(SCHEMA_EXAMPLES)) {
    // A copy: the document's components may be the very objects the serializers were built from.
    const schema = components[name];
    if (schema && !schema.examples) components[name] = { ...schema, examples: [example] };
  }
  const fill = (content: Record<string, Media> | undefined) => {
    for (const media of Object.values(content ?? {})) {
      if (media.example !== undefined || media.examples !== undefined) continue;
      const example = exampleOf(media.schema, components);
      if (example !== undefined) media.example = example;
    }
  };
  for (const item of Object.values(document.paths ?? {}) as Array<Record<string, Operation>>) {
    for (const operation of Object.values(item)) {
      if (typeof operation !== 'object' || operation === null) continue;
      const body = REQUEST_EXAMPLES[operation.operationId ?? ''];
      for (const media of Object.values(operation.requestBody?.content ?? {})) {
        if (body !== undefined && media.example === undefined) media.example = body;
      }
      fill(operation.requestBody?.content);
      for (const [status, response] of Object.entries(operation.responses ?? {})) {
        const answer = RESPONSE_EXAMPLES[`${operation.operationId} ${status}`];
        for (const media of Object.values(response.content ?? {})) {
          if (answer !== undefined && media.example === undefined) media.example = answer;
        }
        fill(response.content);
      }
    }
  }
  return document;
}

const PLAN_REQUIRED = {
  title: 'Plan required',
  status: 403,
  detail: 'The free plan does not include API access.',
  required_plans: PLANS_WITH_API,
  current_plan: 'free',
};

/** The host the problem examples above are written with; a document serves its own instead. */
const EXAMPLE_ERRORS_BASE = 'https://api.tourops.test/errors';

/**
 * Makes a document's examples right for the instance serving it and for each operation: problem
 * `type`s under `errorsBaseUrl`, and on an operation with a scope, its 403 naming that scope.
 * The operation also names its scope in `x-required-scope` and its description. Mutates (copies
 * of the shared examples) and returns the document.
 */
export function instanceExamples<T extends { paths?: object }>(
  document: T,
  options: { errorsBaseUrl: string; scopes?: ReadonlyMap<string, string> },
): T {
  const base = options.errorsBaseUrl.replace(/\/+$/, '');
  for (const item of Object.values(document.paths ?? {}) as Array<
    Record<string, ScopedOperation>
  >) {
    for (const operation of Object.values(item)) {
      if (typeof operation !== 'object' || operation === null) continue;
      const scope = options.scopes?.get(operation.operationId ?? '');
      if (scope !== undefined) {
        // Machine-readable too; `security` cannot carry it (a bearer scheme has no scopes).
        operation['x-required-scope'] = scope;
        const named = `Scope \`${scope}\``;
        if (!operation.description?.includes(named)) {
          operation.description = `${operation.description ?? ''} ${named}.`.trim();
        }
      }
      for (const [status, response] of Object.entries(operation.responses ?? {})) {
        for (const media of Object.values(response.content ?? {})) {
          const example = media.example as { type?: unknown } | undefined;
          if (typeof example?.type !== 'string' || !example.type.startsWith(EXAMPLE_ERRORS_BASE)) {
            continue;
          }
          const own: Record<string, unknown> = {
            ...example,
            type: `${base}${example.type.slice(EXAMPLE_ERRORS_BASE.length)}`,
          };
          if (status === '403' && 'required_scope' in own) {
            // The scope this operation requires; with none, the only 403 left is the plan's.
            media.example =
              scope === undefined
                ? { ...PLAN_REQUIRED, type: `${base}/plan-required` }
                : { ...own, detail: `This token lacks ${scope}.`, required_scope: scope };
            continue;
          }
          media.example = own;
        }
      }
    }
  }
  return document;
}

type ScopedOperation = Operation & {
  description?: string;
  'x-required-scope'?: string;
};
