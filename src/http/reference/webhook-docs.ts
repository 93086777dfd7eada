import type { TSchema } from '@sinclair/typebox';
import { durationText } from '../../domain/durations.ts';
import { sampleEventData } from '../../domain/event-samples.ts';
import { EVENT_DATA_SCHEMAS } from '../../domain/event-schemas.ts';
import {
  EVENT_TYPES,
  type EventType,
  isOneOf,
  SUBSCRIBABLE_EVENT_TYPES,
} from '../../domain/states.ts';
import { type PayloadForm, THIN_DATA_SCHEMAS } from '../../domain/thin-payload.ts';
import { SHARED_SCHEMAS } from '../schemas.ts';

type Json = { [key: string]: unknown };

/** Fixed, so the document is the same on every start. */
const EXAMPLE_TIME = new Date('2026-11-05T10:02:44.019Z');
const EXAMPLE_IDS: Record<string, string> = {
  bkg: 'bkg_01JD3XA4F7R2N8QK6T5V9MWZHB',
  trp: 'trp_01JD3X7E9P2QK5VN4T8R6MZWYC',
  pay: 'pay_01JD3XB6N3T8R5K2V7M9QWZCDE',
  cli: 'cli_01JD3X9C2M7T4RK8V5N6QWZPYD',
};
const exampleId = (prefix: string) => EXAMPLE_IDS[prefix] ?? `${prefix}_01JD3XC8K2V5R7N4T9M6QWZBHF`;

export interface WebhookDocsOptions {
  /** Named in the User-Agent we send. */
  publicBaseUrl: string;
  /** Delays before the retries (config WEBHOOK_RETRY_SCHEDULE). */
  retryScheduleMs: readonly number[];
  /** Budget of one attempt (config WEBHOOK_TIMEOUT_MS). */
  timeoutMs: number;
}

/** Typed by EventType, so a new event type does not compile until it is documented here. */
const EVENT_DOCS: Record<EventType, { summary: string; description: string }> = {
  'booking.confirmed': {
    summary: 'Booking confirmed',
    description: 'A booking moved from `deposit_paid` to `confirmed`.',
  },
  'booking.cancelled': {
    summary: 'Booking cancelled',
    description: 'A confirmed booking was cancelled.',
  },
  'booking.refunded': {
    summary: 'Booking refunded',
    description:
      'A booking was refunded: a confirmed one, or a disputed one whose dispute closed with a refund (then `dispute.closed` is sent too).',
  },
  'dispute.opened': {
    summary: 'Dispute opened',
    description: 'A confirmed booking was disputed.',
  },
  'dispute.closed': {
    summary: 'Dispute closed',
    description:
      'A dispute ended: the booking is confirmed again, or refunded (then `booking.refunded` is sent too).',
  },
  'payment.succeeded': { summary: 'Payment succeeded', description: 'A payment succeeded.' },
  'payment.failed': { summary: 'Payment failed', description: 'A payment failed.' },
  'trip.published': {
    summary: 'Trip published',
    description: 'A trip was published on the storefront.',
  },
  'trip.unpublished': {
    summary: 'Trip unpublished',
    description: 'A trip was taken off the storefront.',
  },
  'client.created': { summary: 'Client created', description: 'A client was created.' },
  'trip.created': {
    summary: 'Trip created',
    description: 'A trip was created (`POST /api/v1/trips`, or the operator console).',
  },
  'trip.updated': {
    summary: 'Trip changed',
    description:
      'A trip changed otherwise than by its publication: a `PATCH /api/v1/trips/{id}`, or a move of its `status` (the operator console).',
  },
  'booking.created': {
    summary: 'Booking created',
    description: 'A booking was created by checkout, in `payment_pending`.',
  },
  'booking.updated': {
    summary: 'Booking changed',
    description:
      'A booking moved to a status no other booking type announces: `deposit_paid`, `trip_in_progress` or `completed`.',
  },
  'client.updated': {
    summary: 'Client changed',
    description: 'A client was archived or unarchived.',
  },
  'payment.created': {
    summary: 'Payment created',
    description: 'A payment was created by the payment processor, `pending`.',
  },
  'payment.updated': {
    summary: 'Payment changed',
    description:
      'A payment moved to a status no other payment type announces: `scheduled`, `processing` or `cancelled`.',
  },
  'webhook.endpoint.paused': {
    summary: 'Endpoint paused',
    description:
      "One of the tenant's webhook subscriptions was paused without anyone asking: its receiver answered 410 Gone (`reason` `gone`) or failed by the auto-pause rule (`consecutive_failures`). Sent to the tenant's other subscriptions that list it, never to the paused one. Enable it again with `PATCH` `active: true`, then `recover` with `missed: true`.",
  },
  'personal_data.erased': {
    summary: 'Personal data erased',
    description:
      'An erasure (`POST /api/v1/erasures`) is done: the personal members of the clients and bookings named were redacted in the live resources and in every stored copy (events, attempt logs, saved answers). Ids only: a receiver that keeps copies applies the same placeholders to those ids (client `email`, `phone`, `legalName`, `vatId`, `notes` null, `tags` `[]`, `displayName` `"Erased client"`; booking `travelerName`, `travelerEmail` null). Sent once.',
  },
  'webhook.delivery.dead_lettered': {
    summary: 'Delivery dead-lettered',
    description:
      "A delivery to one of the tenant's webhook subscriptions was given up after its last attempt, or because its attempts kept dying with their worker (the delivery's `lastError` `worker_lost`; `attempts` counts only those that finished, 0 if none did). Sent to the tenant's other subscriptions that list it, never to that one; the dead letter of an operational event announces nothing. `recover` or `redeliver` sends it again.",
  },
  'webhook.test': {
    summary: 'Test event',
    description:
      "Sent only on request (`POST /api/v1/webhooks/test`): to the subscription named, or to every active subscription whatever its events list (no subscription can list it), to check the endpoint and its signature verification. Its outcome changes none of the subscription's counters.",
  },
};

const JSON_TYPES = new Set(['string', 'number', 'integer', 'boolean', 'object', 'array', 'null']);
/** Keywords whose value is a schema or an array of schemas. */
const SCHEMA_KEYWORDS = new Set([
  'items',
  'prefixItems',
  'additionalProperties',
  'unevaluatedProperties',
  'unevaluatedItems',
  'contains',
  'propertyNames',
  'not',
  'if',
  'then',
  'else',
  'allOf',
  'anyOf',
  'oneOf',
]);
/** Keywords whose value maps names (data, not keywords) to schemas. */
const SCHEMA_MAP_KEYWORDS = new Set([
  'properties',
  'patternProperties',
  'dependentSchemas',
  '$defs',
  'definitions',
]);

/**
 * A TypeBox schema as a self-contained OpenAPI 3.1 schema:
 * - the JSON round trip drops TypeBox's symbol keys ([Kind], [OptionalKind]);
 * - `$ref`s to shared schemas are inlined and `$id`s dropped, so each webhook schema resolves
 *   on its own (also when a consumer copies it into its validator);
 * - `additionalProperties: false` is dropped: it holds us to the fields we emit, but consumers
 *   must ignore unknown fields, and one validating with it would fail deliveries once a field
 *   is added.
 * Other keywords (`const`, `enum`, `examples`…) are copied as they are.
 */
export function toDocumentSchema(
  schema: TSchema,
  shared: readonly TSchema[] = SHARED_SCHEMAS,
  /** Keeps `additionalProperties: false`: the schema exactly as emit checks (the catalog's). */
  closed = false,
): Json {
  const byId = new Map(shared.map((s) => [s.$id, s]));
  const convert = (node: unknown, inlining: readonly string[]): unknown => {
    if (Array.isArray(node)) return node.map((item) => convert(item, inlining));
    // Boolean schemas (`true`/`false`) stay as they are.
    if (typeof node !== 'object' || node === null) return node;
    const { $id: _id, $ref, ...rest } = node as Json;
    if (typeof $ref === 'string') {
      const target = byId.get($ref);
      // A dangling or recursive reference cannot be inlined: fail at start-up, not in a consumer.
      if (target === undefined || inlining.includes($ref)) {
        throw new Error(`webhook docs: cannot inline $ref ${$ref}`);
      }
      return convert(JSON.parse(JSON.stringify(target)), [...inlining, $ref]);
    }
    // TypeBox's JavaScript-only types (Date, Uint8Array…) have no JSON form to publish.
    for (const type of [rest.type ?? []].flat()) {
      if (!JSON_TYPES.has(type as string)) {
        throw new Error(`webhook docs: ${String(type)} is not a JSON type`);
      }
    }
    if (rest.additionalProperties === false && !closed) delete rest.additionalProperties;
    const out: Json = {};
    for (const [key, value] of Object.entries(rest)) {
      if (SCHEMA_KEYWORDS.has(key)) {
        out[key] = convert(value, inlining);
      } else if (SCHEMA_MAP_KEYWORDS.has(key) && typeof value === 'object' && value !== null) {
        out[key] = Object.fromEntries(
          Object.entries(value).map(([name, sub]) => [name, convert(sub, inlining)]),
        );
      } else {
        out[key] = value;
      }
    }
    return out;
  };
  return convert(JSON.parse(JSON.stringify(schema)), []) as Json;
}

function deliveryDescription(options: WebhookDocsOptions): string {
  const attempts = options.retryScheduleMs.length + 1;
  return [
    'Each delivery is an HTTPS POST of the JSON envelope below.',
    '**Verify** `Service-Signature` against the raw body before parsing it: each `v1` is the ' +
      'lower-case hex HMAC-SHA256, keyed by the whole signing key string (`whsec_…`), of ' +
      '`<t>.<raw body>`. Accept when any `v1` matches (compare in constant time) and reject old ' +
      "`t` values. Stripe's `stripe.webhooks.constructEvent` verifies it. For 24 hours after a key " +
      "rotation the header also carries the retired key's `v1` (the new key first; a second " +
      'rotation within them adds a third). Code for Node and Python: ' +
      '"Receiving webhooks" in the introduction.',
    '**Deduplicate** on `id` (= `Service-Event-Id`): every retry and redelivery of the event ' +
      'carries it. Ignore unknown fields: new ones may be added.',
    '**Never miss one**: keep the last `sequence` processed per subscription; when one arrives ' +
      'past the next, pull `GET /api/v1/webhooks/{id}/events?after=<last>` for what is missing.',
    `**Answer** any 2xx within ${durationText(options.timeoutMs)}. Any other status, a redirect ` +
      '(not followed) or a time-out is a failure, retried after ' +
      `${options.retryScheduleMs.map(durationText).join(', ')} (${attempts} attempts in all; ` +
      "a subscription's `retrySchedule` sets its own); then the delivery is dead-lettered. " +
      '**Slow us down** with a 429 or 503 and `Retry-After` ' +
      '(seconds or an HTTP date, at most an hour is honoured): no delivery goes to the endpoint ' +
      'until then, and the answered one retries at the later of that and its scheduled wait. ' +
      'A 429, 502, 503, 504, time-out or refused connection also halves how many deliveries ' +
      'are in flight to it at once; the limit starts at 4 and grows back by one as you answer ' +
      "in time, up to the subscription's `maxConcurrency` (`deliveryState` shows it).",
  ].join('\n\n');
}

function headers(type: EventType, options: WebhookDocsOptions) {
  const userAgent = `Service-Webhooks/1.0 (+${options.publicBaseUrl})`;
  const header = (name: string, description: string, schema: Json, required = true) => ({
    name,
    in: 'header' as const,
    required,
    description,
    schema,
  });
  const sequence =
    type === 'webhook.test'
      ? []
      : [
          header(
            'Service-Event-Sequence',
            "The event's `sequence` in this subscription's ledger (equals the body's); absent on test events.",
            { type: 'integer', minimum: 1 },
            false,
          ),
        ];
  return [
    header('Content-Type', 'The body is JSON (UTF-8).', {
      type: 'string',
      const: 'application/json',
    }),
    header('User-Agent', '`Service-Webhooks/1.0`, then an informational address.', {
      type: 'string',
      pattern: '^Service-Webhooks/1\\.0( .*)?$',
      examples: [userAgent],
    }),
    header(
      'Service-Signature',
      '`t=<unix seconds>,v1=<hex>`; another `v1` for 24 hours after a key rotation (new key first).',
      {
        type: 'string',
        pattern: '^t=[0-9]+(,v1=[0-9a-f]{64}){1,2}$',
        examples: [`t=1767225600,v1=${'5f2b'.repeat(16)}`],
      },
    ),
    header('Service-Event-Type', 'The event type; equals the body `type`.', {
      type: 'string',
      const: type,
    }),
    header(
      'Service-Event-Id',
      'The event id; equals the body `id`, the same on every retry and redelivery.',
      { type: 'string', format: 'uuid' },
    ),
    header(
      'Service-Request-Id',
      '`<delivery id>.<attempt>`: unique per HTTP attempt; quote it when contacting support.',
      {
        type: 'string',
        pattern: '^[^.]+\\.[1-9][0-9]*$',
        examples: ['dlv_01JQ4Z8K6M2VXNB7R3T5W9YCDE.1'],
      },
    ),
    header(
      'Service-Delivery-Attempt',
      'Attempt number of this delivery, from 1; a redelivery starts again at 1.',
      { type: 'integer', minimum: 1 },
    ),
    ...sequence,
    header(
      'webhook-id',
      'Standard Webhooks (when the subscription has `standardWebhooks`): the event id.',
      { type: 'string', format: 'uuid' },
      false,
    ),
    header(
      'webhook-timestamp',
      'Standard Webhooks: unix seconds, the `t` of `Service-Signature`.',
      { type: 'integer', minimum: 0 },
      false,
    ),
    header(
      'webhook-signature',
      'Standard Webhooks: `v1,<base64 HMAC-SHA256>` of `<webhook-id>.<webhook-timestamp>.<body>` per signing key (current first), space separated; the `standardwebhooks` libraries verify it with the same `whsec_` key string. With `asymmetricSignatures`, then `v1a,<base64 Ed25519 signature>` of the same text per key pair (current first), which the subscription `publicKey` (`whpk_…`) verifies.',
      { type: 'string', pattern: '^v1a?,[A-Za-z0-9+/=]+( v1a?,[A-Za-z0-9+/=]+)*$' },
      false,
    ),
  ];
}

/**
 * The body: the event envelope around that event type's `data` in the form given (`closed`: see
 * toDocumentSchema).
 */
function envelope(type: EventType, closed = false, form: PayloadForm = 'full'): Json {
  const data = form === 'thin' ? THIN_DATA_SCHEMAS[type] : EVENT_DATA_SCHEMAS[type];
  return {
    type: 'object',
    required: ['id', 'type', 'created', 'data'],
    properties: {
      id: {
        type: 'string',
        format: 'uuid',
        description: 'Event id, the deduplication key; equals `Service-Event-Id`.',
      },
      type: { type: 'string', const: type, description: 'The event type.' },
      created: {
        type: 'integer',
        minimum: 0,
        description: 'Unix seconds when this attempt was sent.',
      },
      test: {
        type: 'boolean',
        const: true,
        description:
          'Present only on events fired by `POST /api/v1/webhooks/test`: sample data, ids that name no real row. Absent on real events.',
      },
      sequence: {
        type: 'integer',
        minimum: 1,
        description:
          "This event's place in the subscription's ledger: 1, 2, 3, … in commit order, no gap; a redelivery keeps it; absent on test events. A gap means a missed event: pull `GET /api/v1/webhooks/{id}/events?after=<the last one processed>`.",
      },
      data: toDocumentSchema(data, SHARED_SCHEMAS, closed),
    },
    ...(closed ? { additionalProperties: false } : {}),
  };
}

/** What a thin body of the type carries in `data`, in a few words for its reference entry. */
function thinSummary(type: EventType): string {
  const members = Object.keys(THIN_DATA_SCHEMAS[type].properties).map((name) => `\`${name}\``);
  return `A \`thin\` subscription gets \`data\` as ${members.join(', ')} only (the body's second form; the full body: \`GET /api/v1/events/{id}\`).`;
}

/** A delivery's body of the type, as the reference and the catalog show it. */
function exampleBody(type: EventType) {
  return {
    id: '0b7e8f52-3c1d-4e7a-9f26-5d8c1a4b7e90',
    type,
    created: 1_793_870_565,
    ...(type === 'webhook.test' ? {} : { sequence: 42 }),
    data: sampleEventData(type, EXAMPLE_TIME, exampleId),
  };
}

/**
 * The event catalog (`GET /api/v1/event-types`): each type, what it announces, whether a
 * subscription can list it, the JSON Schema (2020-12) of its whole body, closed as emit checks
 * it (`additionalProperties: false`; the reference's copy is open, for receivers that must
 * ignore fields added later), and an example body.
 */
export function eventCatalog() {
  return EVENT_TYPES.map((type) => ({
    type,
    description: EVENT_DOCS[type].description,
    subscribable: isOneOf(SUBSCRIBABLE_EVENT_TYPES, type),
    schema: { $schema: 'https://json-schema.org/draft/2020-12/schema', ...envelope(type, true) },
    thinSchema: {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      ...envelope(type, true, 'thin'),
    },
    example: exampleBody(type),
  }));
}

function operationId(type: EventType): string {
  const words = type.split(/[._]/);
  return `${words[0]}${words
    .slice(1)
    .map((w) => w[0].toUpperCase() + w.slice(1))
    .join('')}Event`;
}

/**
 * The OpenAPI 3.1 `webhooks` section: one entry per event type, its body built from the schema
 * that validates the event at emit time, so the document cannot drift from what is sent.
 */
export function webhookDocs(options: WebhookDocsOptions) {
  const delivery = deliveryDescription(options);
  return Object.fromEntries(
    EVENT_TYPES.map((type) => [
      type,
      {
        post: {
          operationId: operationId(type),
          // Sent by us to the subscriber: no token of this API is involved.
          security: [],
          summary: EVENT_DOCS[type].summary,
          description: [
            EVENT_DOCS[type].description,
            // webhook.test is sent on request only, whatever the events lists.
            type === 'webhook.test' ? '' : ' Sent to every active subscription that lists it.',
            ` ${thinSummary(type)}`,
            `\n\n${delivery}`,
          ].join(''),
          parameters: headers(type, options),
          requestBody: {
            required: true,
            content: {
              'application/json': {
                // Either form (a thin `data` has `changed` and no `object`, a full one the
                // reverse): `anyOf`, since linters cannot see that the two exclude each other.
                schema: { anyOf: [envelope(type), envelope(type, false, 'thin')] },
                example: exampleBody(type),
              },
            },
          },
          responses: {
            '2XX': { description: 'Received; any 2xx acknowledges the delivery.' },
            default: {
              description: 'Any other answer, a redirect or a time-out: the attempt failed.',
            },
          },
        },
      },
    ]),
  );
}
