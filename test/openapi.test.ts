import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import SwaggerParser from '@apidevtools/swagger-parser';
import { Type } from '@sinclair/typebox';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import packageJson from '../package.json' with { type: 'json' };
import { sampleEventData } from '../src/domain/event-samples.ts';
import { assertEventData, type EventData } from '../src/domain/event-schemas.ts';
import { SCOPES } from '../src/domain/plans.ts';
import { Trip } from '../src/domain/resources.ts';
import { newSigningKey, signatureHeader, standardSignature } from '../src/domain/signing.ts';
import { EVENT_TYPES, type EventType } from '../src/domain/states.ts';
import { toDocumentSchema, webhookDocs } from '../src/http/reference/webhook-docs.ts';
import { Meta } from '../src/http/schemas.ts';
import { ADMIN_TOKEN, createTestContext, type TestContext } from './helpers/context.ts';
import { createTenant, mintToken } from './helpers/fixtures.ts';

interface Op {
  operationId: string;
  description?: string;
  'x-required-scope'?: string;
  responses: Record<
    string,
    { content?: Record<string, { example?: { type: string; required_scope?: string } }> }
  >;
}

interface WebhookOperation {
  operationId: string;
  parameters: Array<{ name: string; in: string; required?: boolean; schema: Schema }>;
  requestBody: { required: boolean; content: Record<string, { schema: Schema }> };
  responses: Record<string, { description: string }>;
}
interface Schema {
  type?: string;
  required?: string[];
  properties?: Record<string, Schema>;
  const?: unknown;
  pattern?: string;
  additionalProperties?: unknown;
  anyOf?: Schema[];
}

const WEBHOOK_HEADERS = [
  'Content-Type',
  'User-Agent',
  'Service-Signature',
  'Service-Event-Type',
  'Service-Event-Id',
  'Service-Request-Id',
  'Service-Delivery-Attempt',
];

/** Sent when they apply: the sequence (not on test events), Standard Webhooks when asked for. */
const OPTIONAL_WEBHOOK_HEADERS = ['webhook-id', 'webhook-timestamp', 'webhook-signature'];

/** Data the domain itself accepts for each type (checked with assertEventData below). */
const SAMPLE_DATA = Object.fromEntries(
  EVENT_TYPES.map((type) => [
    type,
    sampleEventData(type, new Date('2027-01-05T10:00:00.000Z'), (prefix) => `${prefix}_01`),
  ]),
) as { [T in EventType]: EventData<T> };

function envelope(type: string, data: unknown) {
  return { id: '0b6c7f3e-6a3c-4c8e-9d0a-2f1e5b7c9a11', type, created: 1_767_225_600, data };
}

/** Symbol keys anywhere in a value (TypeBox marks its schemas with them). */
function symbolKeys(value: unknown): symbol[] {
  if (typeof value !== 'object' || value === null) return [];
  return [
    ...Object.getOwnPropertySymbols(value),
    ...Object.values(value).flatMap((child) => symbolKeys(child)),
  ];
}

describe('OpenAPI documents', () => {
  let ctx: TestContext;

  before(async () => {
    ctx = await createTestContext('sqlite');
  });
  after(() => ctx.close());

  it('serves the same OpenAPI 3.1 document at /v1/openapi.json and /openapi.json, valid for an external validator', async () => {
    const v1 = await ctx.app.inject({ method: 'GET', url: '/v1/openapi.json' });
    const root = await ctx.app.inject({ method: 'GET', url: '/openapi.json' });
    assert.equal(v1.statusCode, 200);
    assert.equal(v1.body, root.body);
    const document = v1.json();
    assert.equal(document.openapi, '3.1.0');
    // The API description's version (api-spec "Versioning"), not the release's.
    assert.equal(document.info.version, '1.1.0');
    assert.equal(document.info['x-release'], packageJson.version);
    assert.deepEqual(document.servers, [{ url: 'http://api.test' }]);
    assert.equal(document.components.securitySchemes.bearerAuth.scheme, 'bearer');
    assert.ok(document.webhooks, 'the document has a webhooks section');
    await SwaggerParser.validate(structuredClone(document));
  });

  it('has the external validator check the webhooks section too', async () => {
    const document = (await ctx.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
    // A broken entry must fail validation, or the passing validation above proves nothing.
    const badHeader = structuredClone(document);
    badHeader.webhooks['booking.confirmed'].post.parameters[0].in = 'body';
    await assert.rejects(SwaggerParser.validate(badHeader), /webhooks\/booking\.confirmed/);
    const danglingRef = structuredClone(document);
    danglingRef.webhooks['trip.published'].post.requestBody.content['application/json'].schema = {
      $ref: '#/components/schemas/Nowhere',
    };
    await assert.rejects(SwaggerParser.validate(danglingRef), /Nowhere/);
  });

  it('gives every operation an id, its parameters and a schema for each status it can answer', async () => {
    const document = (await ctx.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
    const ids = new Set<string>();
    for (const [path, methods] of Object.entries<
      Record<
        string,
        {
          operationId: string;
          responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
          parameters?: unknown[];
        }
      >
    >(document.paths)) {
      assert.ok(path.startsWith('/api/v1/'), path);
      for (const [method, operation] of Object.entries(methods)) {
        assert.ok(operation.operationId, `${method} ${path} has an operationId`);
        assert.ok(!ids.has(operation.operationId));
        ids.add(operation.operationId);
        for (const status of ['401', '403', '500']) {
          assert.ok(operation.responses[status], `${method} ${path} documents ${status}`);
        }
        for (const [status, response] of Object.entries(operation.responses)) {
          // 204 No Content has no body to describe.
          if (status === '204') {
            assert.equal(response.content, undefined, `${method} ${path} 204 has no body`);
            continue;
          }
          const media = Object.values(response.content ?? {});
          assert.ok(
            media.length > 0 && media.every((m) => m.schema),
            `${method} ${path} ${status} has a schema`,
          );
        }
        if (path.includes('{id}')) {
          assert.ok(operation.parameters?.length, `${method} ${path} documents its path parameter`);
        }
      }
    }
    assert.equal(
      document.paths['/api/v1/trips'].post.requestBody.content['application/json'].schema
        .additionalProperties,
      false,
    );
    // Bodies are required where Fastify needs one; the test fire's may be left out.
    assert.equal(document.paths['/api/v1/trips'].post.requestBody.required, true);
    const testFire = document.paths['/api/v1/webhooks/test'].post;
    assert.equal(testFire.requestBody.required, false);
    assert.ok(testFire.requestBody.content['application/json'].schema);
    assert.ok(!JSON.stringify(document).includes('x-optional-body'));
    assert.ok(document.components.schemas.Problem);
    assert.ok(
      !JSON.stringify(document).includes('/admin/'),
      'the admin API is not in the public document',
    );
  });

  describe('webhooks', () => {
    let webhooks: Record<string, { post: WebhookOperation }>;
    let paths: Record<string, Record<string, { operationId: string }>>;
    /** The body in the form given: a delivery is either (`anyOf`: full, then thin). */
    const bodySchema = (type: string, form: 'full' | 'thin' = 'full') =>
      (webhooks[type].post.requestBody.content['application/json'].schema.anyOf as Schema[])[
        form === 'full' ? 0 : 1
      ];

    before(async () => {
      const document = (await ctx.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
      webhooks = document.webhooks;
      paths = document.paths;
    });

    it('has one entry per event type, an envelope around its data, with unique operation ids', () => {
      assert.deepEqual(Object.keys(webhooks).sort(), [...EVENT_TYPES].sort());
      const ids = new Set(
        Object.values(paths).flatMap((methods) => Object.values(methods).map((o) => o.operationId)),
      );
      for (const [type, { post }] of Object.entries(webhooks)) {
        assert.ok(post.operationId && !ids.has(post.operationId), `${type} has a unique id`);
        ids.add(post.operationId);
        assert.equal(post.requestBody.required, true);
        assert.deepEqual(Object.keys(post.requestBody.content), ['application/json']);
        const schema = bodySchema(type);
        assert.deepEqual([...(schema.required ?? [])].sort(), ['created', 'data', 'id', 'type']);
        assert.equal(schema.properties?.type.const, type);
        assert.equal(schema.properties?.created.type, 'integer');
        assert.equal(schema.properties?.data.type, 'object');
        const thin = bodySchema(type, 'thin');
        assert.deepEqual(thin.required, schema.required);
        assert.ok(thin.properties?.data.required?.includes('changed'), `${type}: thin data`);
        assert.ok(!thin.properties?.data.properties?.object, `${type}: no object in thin data`);
        assert.ok(post.responses['2XX']?.description && post.responses.default?.description);
      }
    });

    it('publishes the data schema of booking.confirmed', () => {
      const data = bodySchema('booking.confirmed').properties?.data;
      for (const field of ['bookingId', 'tripId', 'status', 'totalRetailCents', 'currency']) {
        assert.ok(data?.required?.includes(field), `data requires ${field}`);
      }
      assert.equal(data?.properties?.status.const, 'confirmed');
    });

    it('lists the seven delivery headers and the optional ones, with patterns that match what is sent', () => {
      const key = newSigningKey();
      const oneKey = signatureHeader(1_767_225_600, '{}', [key]);
      const twoKeys = signatureHeader(1_767_225_600, '{}', [key, newSigningKey()]);
      const standardTwoKeys = standardSignature('evt', 1_767_225_600, '{}', [key, newSigningKey()]);
      for (const [type, { post }] of Object.entries(webhooks)) {
        const all = post.parameters.filter((p) => p.in === 'header');
        const headers = all.filter((h) => h.required);
        assert.deepEqual(
          headers.map((h) => h.name),
          WEBHOOK_HEADERS,
          `${type} lists the headers`,
        );
        assert.deepEqual(
          all.filter((h) => !h.required).map((h) => h.name),
          type === 'webhook.test'
            ? OPTIONAL_WEBHOOK_HEADERS
            : ['Service-Event-Sequence', ...OPTIONAL_WEBHOOK_HEADERS],
        );
        assert.ok(all.every((h) => h.schema));
        const signature = all.find((h) => h.name === 'webhook-signature')?.schema.pattern as string;
        assert.ok(new RegExp(signature).test(standardTwoKeys), standardTwoKeys);
        const schema = Object.fromEntries(headers.map((h) => [h.name, h.schema]));
        assert.equal(schema['Service-Event-Type'].const, type);
        assert.equal(schema['Content-Type'].const, 'application/json');
        const matches = (name: string, value: string) =>
          new RegExp(schema[name].pattern as string).test(value);
        assert.ok(matches('Service-Signature', oneKey));
        assert.ok(matches('Service-Signature', twoKeys));
        assert.ok(!matches('Service-Signature', `${oneKey.toUpperCase()}`));
        assert.ok(matches('User-Agent', 'Service-Webhooks/1.0 (+http://api.test)'));
        assert.ok(!matches('User-Agent', 'Service-Webhooks/2.0'));
        assert.ok(matches('Service-Request-Id', 'dlv_01JQ4Z8K6M2VXNB7R3T5W9YCDE.3'));
        assert.ok(!matches('Service-Request-Id', 'dlv_01JQ4Z8K6M2VXNB7R3T5W9YCDE'));
      }
    });

    it('accepts the payloads the domain emits and rejects broken ones', () => {
      const ajv = addFormats.default(new Ajv2020.default({ strict: false, allErrors: true }));
      const validator = (type: string) => ajv.compile(structuredClone(bodySchema(type)));
      for (const type of EVENT_TYPES) {
        assert.doesNotThrow(() => assertEventData(type, SAMPLE_DATA[type]));
        const validate = validator(type);
        assert.ok(
          validate(envelope(type, SAMPLE_DATA[type])),
          `${type}: ${ajv.errorsText(validate.errors)}`,
        );
      }

      const confirmed = validator('booking.confirmed');
      const data = SAMPLE_DATA['booking.confirmed'];
      const { currency: _, ...withoutCurrency } = data;
      const broken: Array<[string, unknown]> = [
        ['a status other than confirmed', envelope('booking.confirmed', { ...data, status: 'x' })],
        ['no currency', envelope('booking.confirmed', withoutCurrency)],
        ['cents as a string', envelope('booking.confirmed', { ...data, totalRetailCents: '1' })],
        ['another type', envelope('booking.cancelled', data)],
        ['an ISO created', { ...envelope('booking.confirmed', data), created: '2027-01-01' }],
        ['an id that is no UUID', { ...envelope('booking.confirmed', data), id: 'evt_1' }],
      ];
      for (const [what, payload] of broken) {
        assert.equal(confirmed(payload), false, `rejects ${what}`);
      }
      assert.throws(() => assertEventData('booking.confirmed', { ...data, status: 'x' }));
      // An object with a member its GET does not show (internal, or secret) is never sent.
      const withInternal = { ...data, object: { ...data.object, tenantId: 'ten_01' } };
      assert.throws(() => assertEventData('booking.confirmed', withInternal), /object/);
      assert.equal(
        confirmed(envelope('booking.confirmed', withInternal)),
        true,
        'the doc: extras pass',
      );

      // We never send unknown fields, but consumers must ignore them: the doc lets them pass.
      assert.ok(confirmed({ ...envelope('booking.confirmed', { ...data, extra: 1 }), more: 2 }));
    });

    it('leaks no TypeBox internals and inlines shared schemas', () => {
      const docs = webhookDocs({
        publicBaseUrl: 'http://api.test',
        retryScheduleMs: [60_000],
        timeoutMs: 10_000,
      });
      assert.deepEqual(symbolKeys(docs), []);
      assert.ok(!/"\$(id|ref)"/.test(JSON.stringify(webhooks)), 'self-contained, no $id/$ref');

      const converted = toDocumentSchema(Type.Object({ meta: Type.Ref(Meta), trip: Trip }));
      assert.deepEqual(symbolKeys(converted), []);
      const properties = converted.properties as Record<string, Schema>;
      assert.deepEqual(properties.meta.required, Meta.required);
      assert.equal(properties.trip.properties?.title.type, 'string');
      assert.ok(!/"\$(id|ref)"/.test(JSON.stringify(converted)));
      assert.throws(() => toDocumentSchema(Type.Object({ x: Type.Ref('Nowhere') })), /Nowhere/);
      assert.throws(() => toDocumentSchema(Type.Object({ at: Type.Date() })), /JSON type/);
    });
  });

  it('names the scope of each operation, the one the server enforces, and its own 403', async () => {
    const document = (await ctx.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
    const tenant = await createTenant(ctx);
    const tokens = new Map<string, string>();
    const lacking = async (scope: string) => {
      let token = tokens.get(scope);
      if (token === undefined) {
        const others = SCOPES.filter((other) => other !== scope);
        token = (await mintToken(ctx, tenant.id, others, tenant.ownerId)).token;
        tokens.set(scope, token);
      }
      return token;
    };
    const errorsBase = `${ctx.runtime.config.errorsBaseUrl}/`;
    let checked = 0;
    for (const [path, item] of Object.entries(document.paths) as [string, Record<string, Op>][]) {
      for (const [method, operation] of Object.entries(item)) {
        const scope = operation['x-required-scope'];
        const forbidden =
          operation.responses['403']?.content?.['application/problem+json']?.example;
        for (const response of Object.values(operation.responses)) {
          const example = response.content?.['application/problem+json']?.example;
          if (example)
            assert.ok(
              example.type.startsWith(errorsBase),
              `${operation.operationId}: ${example.type}`,
            );
        }
        // Any valid token reads these, whatever its scopes; only a plan without the API is refused.
        if (operation.operationId === 'getMe' || operation.operationId === 'listEventTypes') {
          assert.equal(scope, undefined);
          assert.equal(forbidden?.type, `${errorsBase}plan-required`);
          continue;
        }
        // The scope is the read scope of the event's resource (test/thin-payloads.test.ts).
        if (operation.operationId === 'getEvent') {
          assert.equal(scope, undefined);
          assert.match(operation.description ?? '', /the read scope of the event's resource/);
          continue;
        }
        assert.ok(scope, `${operation.operationId} names no scope`);
        assert.match(operation.description ?? '', new RegExp(`Scope \`${scope}\``));
        assert.equal(forbidden?.required_scope, scope, operation.operationId);
        // A token with every scope but that one is refused, naming it.
        const url = path.replace(/\{[^}]+\}/g, 'x_01JD3X7E9P2QK5VN4T8R6MZWYC');
        const refused = await ctx.api(method.toUpperCase() as 'GET', url, {
          token: await lacking(scope),
        });
        assert.equal(refused.statusCode, 403, `${method} ${url}: ${refused.body}`);
        assert.equal(refused.json().required_scope, scope, `${method} ${url}`);
        checked += 1;
      }
    }
    assert.ok(checked >= 20, `${checked} operations`);
  });

  it('serves the admin API its own document', async () => {
    const response = await ctx.app.inject({
      method: 'GET',
      url: '/admin/v1/openapi.json',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    assert.equal(response.statusCode, 200);
    const document = response.json();
    assert.ok(document.paths['/admin/v1/tenants']);
    await SwaggerParser.validate(structuredClone(document));
  });
});
