import { connect } from 'node:net';
import fc from 'fast-check';
import { Agent, request } from 'undici';
import { RECEIVER_AUTH_FIELDS } from '../../src/http/portal/receiver-auth-form.ts';

/**
 * Adversarial requests generated from the served OpenAPI documents, and the oracle that judges
 * the answers. Shared by `test/fuzz.test.ts` (bounded, in `npm test`) and `npm run fuzz` (as many
 * requests as asked). Requests are sampled from a seed, so a failure replays with that seed.
 */

interface Schema {
  $ref?: string;
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  format?: string;
  pattern?: string;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  items?: Schema;
  properties?: Record<string, Schema>;
  required?: string[];
  anyOf?: Schema[];
  oneOf?: Schema[];
}

interface Parameter {
  in: 'path' | 'query' | 'header';
  name: string;
  required?: boolean;
  schema: Schema;
}

interface OperationDoc {
  parameters?: Parameter[];
  requestBody?: { content?: Record<string, { schema: Schema }> };
  responses: Record<string, unknown>;
}

export interface OpenApiDocument {
  paths: Record<string, Record<string, OperationDoc>>;
  components?: { schemas?: Record<string, Schema> };
}

export interface Operation {
  api: 'public' | 'admin';
  method: string;
  path: string;
  parameters: Parameter[];
  body: Schema | null;
  statuses: Set<string>;
}

interface FuzzRequest {
  operation: string;
  method: string;
  /** Path and query, exactly as written on the wire. */
  url: string;
  headers: Record<string, string>;
  body?: string;
  /** Whether the path still matches the operation's route (else the router answers). */
  routed: boolean;
  statuses: Set<string> | null;
}

/** A raw HTTP/1.1 request for what the parser judges before any route. */
interface RawRequest {
  operation: 'raw';
  text: string;
}

export interface Credentials {
  token: string;
  adminToken: string;
  /** Ids of real resources, so that some requests reach rows (`trp_…`, `cli_…`, `ten_…`). */
  ids: string[];
  /** The same for the admin API, but not the fuzzing tenant and token (it may deactivate them). */
  adminIds: string[];
  /** A signed-in portal session of the fuzzing tenant: its cookies, a form token, ids it sees. */
  portal?: { cookie: string; csrf: string; subscriptionIds: string[]; deliveryIds: string[] };
}

export function operationsOf(document: OpenApiDocument, api: Operation['api']): Operation[] {
  const resolve = (schema: Schema | undefined): Schema | null => {
    if (!schema) return null;
    return schema.$ref
      ? (document.components?.schemas?.[schema.$ref.split('/').pop() ?? ''] ?? null)
      : schema;
  };
  const operations: Operation[] = [];
  for (const [path, methods] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(methods)) {
      operations.push({
        api,
        method: method.toUpperCase(),
        path,
        parameters: operation.parameters ?? [],
        body: resolve(operation.requestBody?.content?.['application/json']?.schema),
        statuses: new Set(Object.keys(operation.responses)),
      });
    }
  }
  return operations;
}

// ---------------------------------------------------------------------------------------------
// Values

/**
 * Whether a value holds what no JSON round trip keeps, the oracle of the property tests (written
 * apart from the product's check): a non-finite number, a NUL, an unpaired surrogate.
 */
export function holdsUnkept(value: unknown): boolean {
  if (typeof value === 'number') return !Number.isFinite(value);
  if (typeof value === 'string') {
    return (
      value.includes('\0') ||
      /[\ud800-\udfff]/.test(value.replace(/[\ud800-\udbff][\udc00-\udfff]/g, ''))
    );
  }
  if (Array.isArray(value)) return value.some(holdsUnkept);
  if (value !== null && typeof value === 'object') return Object.values(value).some(holdsUnkept);
  return false;
}

const BUILT_IN_NAMES = [
  'toString',
  'valueOf',
  'hasOwnProperty',
  'constructor',
  '__proto__',
  'prototype',
  'isPrototypeOf',
  '__defineGetter__',
];

const hostileString = fc.oneof(
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    'a\u0000b',
    '\ud800',
    'x\udfff',
    '\u202e\u0644',
    '😀',
    'null',
    'undefined',
    '[object Object]',
    '../../etc/passwd',
    "'; drop table trips; --",
    '%00',
    '%ff',
    '$' + '{jndi:x}',
    'ZZ',
    'XYZ',
    '0x5',
    '1e309',
    '2026-02-30T00:00:00Z',
    '2026-06-01T22:00:00.250+14:00',
    'https://user:pass@127.0.0.1/',
    'https://1.1.1.1\\@127.0.0.1/',
  ),
  fc.string({ maxLength: 30 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc.integer({ min: 201, max: 3_000 }).map((n) => 'a'.repeat(n)),
);

/** A raw JSON text that is not a well-formed value of most schemas. */
const hostileJson = fc.oneof(
  fc.constantFrom(
    '1e309',
    '-1e309',
    '3000000000',
    '2147483648',
    '-1',
    '0',
    '1.5',
    '9007199254740993',
    'true',
    'null',
    '[]',
    '{}',
    '""',
    '"\\u0000"',
    '"\\ud800"',
    '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]',
    '{"__proto__":{"polluted":1}}',
    '{"constructor":{"prototype":{"polluted":1}}}',
  ),
  hostileString.map((s) => JSON.stringify(s)),
  fc.double().map((n) => (Number.isFinite(n) ? String(n) : '1e400')),
);

function typesOf(schema: Schema): string[] {
  if (schema.enum) return ['enum'];
  return [schema.type ?? 'string'].flat();
}

/** A value the schema accepts (best effort: patterns and formats are approximated). */
function validValue(schema: Schema, depth = 0): fc.Arbitrary<unknown> {
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (schema.enum) return fc.constantFrom(...schema.enum);
  const choices = typesOf(schema).map((type): fc.Arbitrary<unknown> => {
    switch (type) {
      case 'null':
        return fc.constant(null);
      case 'boolean':
        return fc.boolean();
      case 'integer':
        return fc.integer({
          min: Math.max(schema.minimum ?? -1_000_000, -2_000_000_000),
          max: Math.min(schema.maximum ?? 1_000_000, 2_000_000_000),
        });
      case 'number':
        return fc.double({ min: schema.minimum ?? -1e6, max: schema.maximum ?? 1e6, noNaN: true });
      case 'array':
        return depth > 3
          ? fc.constant([])
          : fc.array(validValue(schema.items ?? {}, depth + 1), {
              minLength: schema.minItems ?? 0,
              maxLength: Math.min(schema.maxItems ?? 4, 4),
            });
      case 'object':
        return depth > 3 ? fc.constant({}) : validObject(schema, depth + 1);
      default:
        return validString(schema);
    }
  });
  return choices.length === 1 ? choices[0] : fc.oneof(...choices);
}

function validString(schema: Schema): fc.Arbitrary<string> {
  const max = Math.min(schema.maxLength ?? 40, 60);
  const min = Math.min(schema.minLength ?? 0, max);
  switch (schema.format) {
    case 'date-time':
      return fc
        .date({ min: new Date('2000-01-01'), max: new Date('2099-12-31'), noInvalidDate: true })
        .map((date) => date.toISOString());
    case 'date':
      return fc
        .date({ min: new Date('2000-01-01'), max: new Date('2099-12-31'), noInvalidDate: true })
        .map((date) => date.toISOString().slice(0, 10));
    case 'email':
      return fc.emailAddress().filter((email) => email.length <= max);
    case 'uri':
      return fc.constantFrom('https://127.0.0.1:9/hook', 'https://localhost:9/x');
    case 'country-code':
      return fc.constantFrom('FR', 'PT', 'de', 'US', 'JP');
    case 'currency-code':
      return fc.constantFrom('EUR', 'USD', 'CHF', 'JPY');
  }
  if (schema.pattern) {
    return fc.stringMatching(new RegExp(schema.pattern)).filter((s) => s.length <= 200);
  }
  return fc.string({ minLength: Math.max(min, 1), maxLength: max });
}

/**
 * Payload filters (`filter`) and event data (`data`): free-form objects whose schema says little,
 * so they get values of their own: filter-shaped objects with real and bogus paths, operators and
 * operands, nested `$and`/`$or`, and data for them to match.
 */
const filterOperand = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  hostileString,
  fc.constantFrom('2026-05-01', '2026-02-30', '2026-05-01T09:00:00+25:00', 1e308, -0, []),
);
const filterPath = fc.oneof(
  fc.constantFrom('type', 'data.currency', 'data.amountCents', 'data.kind', 'data.a.b', 'data'),
  fc.constantFrom(...BUILT_IN_NAMES).map((name) => `data.${name}`),
  hostileString,
);
const filterOperators = fc.dictionary(
  fc.oneof(
    fc.constantFrom('$eq', '$neq', '$in', '$nin', '$gt', '$gte', '$lt', '$lte', '$exists'),
    fc.constantFrom('$prefix', '$ne', '$regex', '$where', 'x', ...BUILT_IN_NAMES),
  ),
  fc.oneof(filterOperand, fc.array(filterOperand, { maxLength: 4 })),
  { maxKeys: 3 },
);
export const filterValue: fc.Arbitrary<unknown> = fc.letrec<{ filter: unknown }>((tie) => ({
  filter: fc.oneof(
    { depthSize: 'small' },
    fc.dictionary(filterPath, fc.oneof(filterOperand, filterOperators), { maxKeys: 4 }),
    fc.record({ $and: fc.array(tie('filter'), { maxLength: 3 }) }),
    fc.record({ $or: fc.oneof(fc.array(tie('filter'), { maxLength: 3 }), filterOperand) }),
    fc.constant(null),
    filterOperand,
  ),
})).filter;
export const eventData = fc.dictionary(
  fc.oneof(fc.constantFrom('currency', 'amountCents', 'kind', 'a'), fc.string({ maxLength: 8 })),
  fc.jsonValue({ maxDepth: 3 }),
);
/**
 * Receiver authentication: header names and values (real, reserved, hostile), and both schemes
 * with hostile members. Token URLs are literal loopback or private addresses, or not URLs: no
 * fuzzed value makes the guard resolve a name, and no worker runs to fetch a token.
 */
const receiverHeaders = fc.dictionary(
  fc.oneof(
    fc.constantFrom('X-Api-Key', 'Authorization', 'Service-Signature', 'Host', 'content-type'),
    fc.constantFrom('webhook-id', 'Transfer-Encoding', 'x y', 'x:y', '', ...BUILT_IN_NAMES),
    fc.string({ maxLength: 12 }),
  ),
  fc.oneof(fc.constantFrom('***', 'k-1', 'a\r\nX-Injected: 1', ''), hostileString),
  { maxKeys: 12 },
);
const tokenUrl = fc.constantFrom(
  'https://127.0.0.1:9/token',
  'https://[::1]:9/token',
  'http://127.0.0.1:9/token',
  'https://10.0.0.1:9/token',
  'amqps://127.0.0.1/x',
  'not a url',
  '',
);
const receiverAuth = fc.oneof(
  fc.constant(null),
  fc.record(
    {
      type: fc.constantFrom('basic', 'bearer', 'oauth2_client_credentials'),
      username: fc.oneof(fc.constantFrom('ops', 'a:b', ''), hostileString),
      password: fc.oneof(fc.constantFrom('***', 'pw'), hostileString),
    },
    { requiredKeys: ['type'] },
  ),
  fc.record(
    {
      type: fc.constantFrom('oauth2_client_credentials', 'basic'),
      tokenUrl: fc.oneof(tokenUrl, hostileString),
      clientId: fc.oneof(fc.constant('client'), hostileString),
      clientSecret: fc.oneof(fc.constantFrom('***', 'secret'), hostileString),
      scope: fc.oneof(fc.constant('webhooks'), hostileString),
      audience: fc.oneof(fc.constant('https://api.test'), hostileString),
    },
    { requiredKeys: ['type'] },
  ),
  filterOperand,
);
const FREE_FORM: Record<string, fc.Arbitrary<unknown>> = {
  filter: filterValue,
  data: eventData,
  headers: receiverHeaders,
  auth: receiverAuth,
};

function validObject(schema: Schema, depth: number): fc.Arbitrary<Record<string, unknown>> {
  const properties = schema.properties ?? {};
  const required = new Set(schema.required ?? []);
  const record: Record<string, fc.Arbitrary<unknown>> = {};
  for (const [name, property] of Object.entries(properties)) {
    record[name] = FREE_FORM[name] ?? validValue(property, depth);
  }
  const optional = Object.keys(properties).filter((name) => !required.has(name));
  return fc.record(record, { requiredKeys: [...required].filter((name) => name in record) }).map(
    // fc.record already leaves optional keys out at random; keep that.
    (value) => {
      for (const name of optional) if (value[name] === undefined) delete value[name];
      return value;
    },
  );
}

/** JSON text for a body: valid, valid with one member made hostile, or hostile as a whole. */
function bodyText(schema: Schema | null): fc.Arbitrary<string | undefined> {
  if (!schema) {
    return fc.oneof(
      { weight: 6, arbitrary: fc.constant(undefined) },
      { weight: 1, arbitrary: hostileJson },
      { weight: 1, arbitrary: fc.constant('') },
    );
  }
  const valid = validValue(schema) as fc.Arbitrary<Record<string, unknown>>;
  const names = Object.keys(schema.properties ?? {});
  const withHostileMember = fc
    .tuple(valid, fc.constantFrom(...(names.length ? names : ['x'])), hostileJson)
    .map(([value, name, raw]) => {
      const placeholder = '"__fuzz_raw__"';
      return JSON.stringify({ ...value, [name]: '__fuzz_raw__' }).replace(placeholder, raw);
    });
  const withUnknownMember = fc
    .tuple(valid, fc.constantFrom(...BUILT_IN_NAMES, 'unknownMember', 'a.b', ''), hostileJson)
    .map(([value, name, raw]) => {
      const text = JSON.stringify(value);
      const member = `${JSON.stringify(name)}:${raw}`;
      return text === '{}' ? `{${member}}` : `${text.slice(0, -1)},${member}}`;
    });
  const deep = fc
    .integer({ min: 30, max: 6_000 })
    .map((depth) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`);
  return fc.oneof(
    { weight: 5, arbitrary: valid.map((value) => JSON.stringify(value)) },
    { weight: 3, arbitrary: withHostileMember },
    { weight: 2, arbitrary: withUnknownMember },
    { weight: 1, arbitrary: hostileJson },
    { weight: 1, arbitrary: deep },
    {
      weight: 1,
      arbitrary: fc.constantFrom('', '{', '{"a":1,}', '{"a":1}{"b":2}', 'a=b&c=d', '\u0000'),
    },
  );
}

// ---------------------------------------------------------------------------------------------
// URLs and headers

/** Like encodeURIComponent, but total: a lone surrogate is sent as the bytes Node makes of it. */
function percentEncode(text: string): string {
  let out = '';
  for (const byte of Buffer.from(text, 'utf8')) {
    const char = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-_.~]/.test(char)
      ? char
      : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

const hostileSegment = fc.oneof(
  fc.constantFrom(
    '%00',
    'x%00',
    '%ff',
    '%E0%A4%A',
    '%ED%A0%80',
    '%',
    '%2F',
    '..',
    '%2e%2e',
    'toString',
    '__proto__',
    'constructor',
  ),
  fc.integer({ min: 150, max: 400 }).map((n) => 'A'.repeat(n)),
  fc.string({ maxLength: 20 }).map(percentEncode),
);

const hostileQueryValue = fc.oneof(
  hostileSegment,
  hostileString.map(percentEncode),
  fc.constantFrom('0x5', '1e1', '+5', '-0', '5.0', 'Infinity', '', '%20', '99999999999999999999'),
);

function queryPart(parameters: Parameter[]): fc.Arbitrary<string> {
  const query = parameters.filter((parameter) => parameter.in === 'query');
  const pair = (parameter: Parameter) =>
    fc
      .oneof(
        {
          weight: 3,
          arbitrary: validValue(parameter.schema).map((v) => percentEncode(String(v))),
        },
        { weight: 2, arbitrary: hostileQueryValue },
      )
      .map((value) => `${percentEncode(parameter.name)}=${value}`);
  const extra = fc
    .tuple(
      fc.oneof(
        fc.constantFrom(...BUILT_IN_NAMES),
        fc.constantFrom(...BUILT_IN_NAMES).map((name) => `a[${name}]`),
        fc.constantFrom('publishedAt[gt]', 'limit[]', 'x'),
      ),
      hostileQueryValue,
    )
    .map(([name, value]) => `${name}=${value}`);
  const pairs = [
    ...query.map((parameter) => fc.option(pair(parameter), { nil: undefined, freq: 2 })),
    fc.option(extra, { nil: undefined, freq: 4 }),
  ];
  return fc.tuple(...pairs).map((chosen) => {
    const present = chosen.filter((part): part is string => part !== undefined);
    return present.length ? `?${present.join('&')}` : '';
  });
}

function pathPart(
  operation: Operation,
  ids: string[],
): fc.Arbitrary<{ path: string; routed: boolean }> {
  const names = [...operation.path.matchAll(/\{(\w+)\}/g)].map((match) => match[1]);
  if (names.length === 0) return fc.constant({ path: operation.path, routed: true });
  const segment = (name: string) => {
    const parameter = operation.parameters.find((p) => p.in === 'path' && p.name === name);
    const valid = parameter?.schema.enum
      ? fc.constantFrom(...parameter.schema.enum.map(String))
      : fc.constantFrom(...(ids.length ? ids : ['x']));
    return fc.oneof(
      { weight: 6, arbitrary: valid.map((value) => ({ value, routed: true })) },
      {
        weight: 1,
        arbitrary: fc
          .string({ minLength: 1, maxLength: 30 })
          .map((s) => ({ value: percentEncode(s), routed: true })),
      },
      { weight: 2, arbitrary: hostileSegment.map((value) => ({ value, routed: false })) },
    );
  };
  return fc.tuple(...names.map(segment)).map((values) => {
    let path = operation.path;
    names.forEach((name, i) => {
      path = path.replace(`{${name}}`, values[i].value);
    });
    return { path, routed: values.every((v) => v.routed) };
  });
}

const contentTypes = fc.constantFrom(
  'application/json',
  'application/json; charset=utf-8',
  'application/json; charset=utf-16',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/problem+json',
  'application/json;;',
  '',
);

const idempotencyKeys = fc.oneof(
  fc.uuid(),
  fc.constantFrom('a'.repeat(256), ' ', 'key with spaces', 'ünïcode'),
  fc.string({ minLength: 1, maxLength: 20 }),
);

function headersFor(operation: Operation, credentials: Credentials, hasBody: boolean) {
  const token = operation.api === 'admin' ? credentials.adminToken : credentials.token;
  const authorization = fc.oneof(
    { weight: 12, arbitrary: fc.constant(`Bearer ${token}`) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        '',
        'Bearer',
        'Bearer tk_test_00000000000000000000000000',
        `Basic ${token}`,
        `Bearer ${operation.api === 'admin' ? credentials.token : credentials.adminToken}`,
        `Bearer ${token} extra`,
      ),
    },
  );
  const write = ['POST', 'PATCH', 'DELETE'].includes(operation.method);
  return fc
    .record({
      authorization,
      contentType: hasBody
        ? fc.oneof(
            { weight: 8, arbitrary: fc.constant('application/json') },
            { weight: 2, arbitrary: contentTypes },
          )
        : fc.option(contentTypes, { nil: undefined, freq: 6 }),
      key: write ? fc.option(idempotencyKeys, { nil: undefined, freq: 2 }) : fc.constant(undefined),
      requestId: fc.option(fc.oneof(fc.uuid(), fc.constantFrom('x'.repeat(300), 'a b')), {
        nil: undefined,
        freq: 4,
      }),
    })
    .map(({ authorization, contentType, key, requestId }) => {
      const headers: Record<string, string> = {};
      if (authorization) headers.authorization = authorization;
      if (contentType) headers['content-type'] = contentType;
      if (key !== undefined) headers['idempotency-key'] = key.replace(/[^\x20-\x7e]/g, '?');
      if (requestId !== undefined) headers['service-request-id'] = requestId;
      return headers;
    });
}

/** Requests for one operation: valid, hostile, and everything in between. */
function requestsFor(operation: Operation, credentials: Credentials): fc.Arbitrary<FuzzRequest> {
  return fc
    .tuple(
      pathPart(operation, operation.api === 'admin' ? credentials.adminIds : credentials.ids),
      queryPart(operation.parameters),
      bodyText(operation.body),
    )
    .chain(([path, query, body]) =>
      headersFor(operation, credentials, body !== undefined).map((headers) => ({
        operation: `${operation.method} ${operation.path}`,
        method: operation.method,
        url: `${path.path}${query}`,
        headers,
        body,
        routed: path.routed,
        statuses: operation.statuses,
      })),
    );
}

// ---------------------------------------------------------------------------------------------
// Portal forms: every form of the portal, posted as a browser would, with hostile fields

/**
 * The portal's forms: path template and the fields its page sends (frame fields aside). Not the
 * delete form (no fields, as rotate-key: it would leave every other form a 404) nor sign-out.
 */
const PORTAL_FORMS: Array<[string, string[]]> = [
  ['/portal/endpoints', ['url', 'events', 'filter', 'maxConcurrency', 'maxPerSecond', 'ordering']],
  [
    '/portal/endpoints/{id}',
    [
      'url',
      'events',
      'filter',
      'standardWebhooks',
      'asymmetricSignatures',
      'maxConcurrency',
      'maxPerSecond',
      'ordering',
      'headers',
      'auth',
      ...RECEIVER_AUTH_FIELDS,
    ],
  ],
  ['/portal/endpoints/{id}/pause', []],
  ['/portal/endpoints/{id}/enable', []],
  ['/portal/endpoints/{id}/rotate-key', []],
  ['/portal/endpoints/{id}/test', ['eventType']],
  ['/portal/endpoints/{id}/recover', ['since', 'tzOffset']],
  ['/portal/endpoints/{id}/enable-and-recover', []],
  ['/portal/endpoints/{id}/deliveries/{deliveryId}/redeliver', []],
];

/** What a field of a form is sent as, percent-encoded: a plausible value or a hostile one. */
const formValue = fc.oneof(
  {
    weight: 3,
    arbitrary: fc
      .oneof(
        fc.constantFrom(
          'https://127.0.0.1:9/hook',
          'client.created',
          'booking.confirmed',
          'true',
          'false',
          '4',
          'per_object',
          'none',
          'basic',
          'oauth2_client_credentials',
          'X-Api-Key: k-1',
          '2026-05-01T10:00',
          '0',
          '***',
          '{"data.amountCents": {"$lt": 1e309}}',
          '{"data.kind": "company"}',
          '{"data.x": "\\ud800"}',
        ),
        filterValue.map((value) => JSON.stringify(value) ?? ''),
      )
      .map(percentEncode),
  },
  { weight: 2, arbitrary: hostileQueryValue },
);

function portalRequests(portal: NonNullable<Credentials['portal']>) {
  return fc.constantFrom(...PORTAL_FORMS).chain(([template, fields]) => {
    const foreign = fc.constantFrom(...BUILT_IN_NAMES, 'x', '_csrf', 'idempotencyKey');
    const name =
      fields.length === 0
        ? foreign
        : fc.oneof(
            { weight: 6, arbitrary: fc.constantFrom(...fields) },
            { weight: 1, arbitrary: foreign },
          );
    const pair = fc
      .tuple(name, formValue)
      .map(([field, value]) => `${percentEncode(field)}=${value}`);
    const segment = (ids: string[]) =>
      fc.oneof(
        { weight: 8, arbitrary: fc.constantFrom(...ids).map((id) => ({ id, routed: true })) },
        { weight: 1, arbitrary: hostileSegment.map((id) => ({ id, routed: false })) },
      );
    return fc
      .record({
        csrf: fc.oneof(
          { weight: 10, arbitrary: fc.constant(portal.csrf) },
          { weight: 1, arbitrary: hostileQueryValue },
        ),
        key: fc.oneof(
          { weight: 4, arbitrary: fc.uuid() },
          {
            weight: 1,
            arbitrary: fc.constantFrom(
              '%00',
              'a%00b',
              'k'.repeat(256),
              'k'.repeat(255),
              '',
              'caf%C3%A9',
            ),
          },
          { weight: 1, arbitrary: hostileQueryValue },
        ),
        pairs: fc.array(pair, { maxLength: fields.length === 0 ? 1 : 8 }),
        id: segment(portal.subscriptionIds),
        deliveryId: segment(portal.deliveryIds),
        contentType: fc.oneof(
          { weight: 10, arbitrary: fc.constant('application/x-www-form-urlencoded') },
          { weight: 1, arbitrary: contentTypes },
        ),
      })
      .map(({ csrf, key, pairs, id, deliveryId, contentType }): FuzzRequest => {
        const url = template.replace('{id}', id.id).replace('{deliveryId}', deliveryId.id);
        return {
          operation: `POST ${template}`,
          method: 'POST',
          url,
          headers: { cookie: portal.cookie, 'content-type': contentType },
          body: [`_csrf=${csrf}`, `idempotencyKey=${key}`, ...pairs].join('&'),
          routed: id.routed && deliveryId.routed,
          // The portal answers pages: any status but a 5xx.
          statuses: null,
        };
      });
  });
}

/** Requests the HTTP parser judges: unknown methods, oversized heads, malformed lines. */
const rawRequests: fc.Arbitrary<RawRequest> = fc
  .oneof(
    fc
      .stringMatching(/^[A-Z]{2,12}$/)
      .map((method) => `${method} /api/v1/trips HTTP/1.1\r\nHost: x\r\n\r\n`),
    fc
      .integer({ min: 16_500, max: 40_000 })
      .map((n) => `GET /api/v1/trips HTTP/1.1\r\nHost: x\r\nX-Pad: ${'a'.repeat(n)}\r\n\r\n`),
    fc
      .integer({ min: 16_500, max: 40_000 })
      .map((n) => `GET /api/v1/trips?q=${'a'.repeat(n)} HTTP/1.1\r\nHost: x\r\n\r\n`),
    fc.constantFrom(
      'GET /api/v1/trips HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n',
      'GET /api/v1/trips HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n',
      'GET /api/v1/trips HTTP/9.9\r\nHost: x\r\n\r\n',
      'GET  HTTP/1.1\r\n\r\n',
      'POST /api/v1/clients HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
      'GET /api/v1/trips/%E0%A4%A HTTP/1.1\r\nHost: x\r\n\r\n',
    ),
  )
  .map((text) => ({ operation: 'raw' as const, text }));

// ---------------------------------------------------------------------------------------------
// Sending and judging

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export interface Finding {
  problem: string;
  request: FuzzRequest | RawRequest;
  answer: Answer | null;
}

const LEAKS =
  /FST_ERR|is not a function|Cannot read propert|TypeError|RangeError|ReferenceError|SyntaxError: |SQLITE_|invalid byte sequence|invalid input syntax|node_modules|\n\s+at [\w.<>]+ \(|\bat (async )?[\w.]+ \(\/|"stack"/;

/**
 * An answer without what quotes the caller's own transformation code's faults (a compiler's or
 * a run's message: `SyntaxError: …`, `TypeError: …`, as the code would say them), which the API
 * gives by design: `errors` of `code` and `transformation.code` (and the `detail` naming one), a
 * dry run's `error`s. What is
 * left is ours, and held to LEAKS.
 */
function ownWords(body: string): string {
  return body
    .replace(
      /"(code|transformation\.code|error)":(\["(?:[^"\\]|\\.)*"\]|"(?:[^"\\]|\\.)*")/g,
      '"$1":"…"',
    )
    .replace(/"detail":"(code|transformation\.code): (?:[^"\\]|\\.)*"/g, '"detail":"$1: …"');
}

/** What is wrong with an answer, or null. */
function judge(request: FuzzRequest | RawRequest, answer: Answer): string | null {
  const type = String(answer.headers['content-type'] ?? '');
  if (answer.status >= 500 && answer.status !== 501) return `status ${answer.status}`;
  // The portal answers a person: its errors are pages.
  const portal = request.operation !== 'raw' && (request as FuzzRequest).url.startsWith('/portal');
  const errorType = portal ? 'text/html' : 'application/problem+json';
  if (answer.status >= 400 && !type.startsWith(errorType)) {
    return `error ${answer.status} as ${type || 'no content type'}`;
  }
  if (LEAKS.test(ownWords(answer.body))) {
    return `leaks an internal message: ${answer.body.slice(0, 200)}`;
  }
  const url = request.operation === 'raw' ? '/api/v1' : (request as FuzzRequest).url;
  if (url.startsWith('/api/v1') && !answer.headers['service-request-id']) {
    return `no Service-Request-Id on ${answer.status}`;
  }
  if (request.operation !== 'raw') {
    const fuzzed = request as FuzzRequest;
    const documented =
      fuzzed.statuses === null ||
      fuzzed.statuses.has(String(answer.status)) ||
      // Outside the route: the router's 404, the parser's 431.
      (!fuzzed.routed && (answer.status === 404 || answer.status === 431)) ||
      answer.status === 431;
    if (!documented) return `undocumented status ${answer.status}`;
  }
  return null;
}

class Sender {
  private readonly agent = new Agent({ connections: 16, pipelining: 1, keepAliveTimeout: 10_000 });

  constructor(private readonly origin: string) {}

  async send(fuzzed: FuzzRequest): Promise<Answer> {
    const response = await request(`${this.origin}${fuzzed.url}`, {
      method: fuzzed.method as 'GET',
      headers: fuzzed.headers,
      body: fuzzed.body,
      dispatcher: this.agent,
      headersTimeout: 30_000,
      bodyTimeout: 30_000,
    });
    const body = await response.body.text();
    return { status: response.statusCode, headers: response.headers, body };
  }

  /** One raw exchange on its own socket; the answer must be complete and close as it says. */
  sendRaw(raw: RawRequest): Promise<Answer> {
    const { port, hostname } = new URL(this.origin);
    return new Promise((resolve, reject) => {
      const socket = connect(Number(port), hostname);
      let received = '';
      socket.setTimeout(10_000, () => socket.destroy(new Error('no answer within 10 s')));
      socket.on('data', (chunk) => {
        received += chunk.toString('latin1');
      });
      const finish = () => {
        const [head, ...rest] = received.split('\r\n\r\n');
        const [statusLine, ...lines] = head.split('\r\n');
        const headers: Record<string, string> = {};
        for (const line of lines) {
          const colon = line.indexOf(':');
          if (colon > 0) headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
        }
        const status = Number(statusLine.split(' ')[1]);
        if (!received || Number.isNaN(status)) {
          reject(new Error('the connection closed without an answer'));
          return;
        }
        resolve({ status, headers, body: rest.join('\r\n\r\n') });
      };
      socket.on('error', (error) => (received ? finish() : reject(error)));
      socket.on('close', finish);
      socket.write(raw.text);
    });
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

export interface FuzzReport {
  requests: number;
  byOperation: Map<string, number>;
  byStatus: Map<number, number>;
  findings: Finding[];
}

/**
 * Samples `count` requests from `seed` over every operation (plus raw ones), sends them with
 * `concurrency` in flight, and judges every answer. Stops early past `deadline` (ms since the
 * epoch), but never before `minimum` requests.
 */
export async function fuzz(options: {
  origin: string;
  operations: Operation[];
  credentials: Credentials;
  count: number;
  seed: number;
  concurrency?: number;
  deadline?: number;
  minimum?: number;
  onProgress?: (done: number) => void;
}): Promise<FuzzReport> {
  const arbitrary = fc.oneof(
    {
      weight: 30,
      arbitrary: fc
        .constantFrom(...options.operations)
        .chain((op) => requestsFor(op, options.credentials)),
    },
    { weight: 1, arbitrary: rawRequests },
    ...(options.credentials.portal === undefined
      ? []
      : [{ weight: 4, arbitrary: portalRequests(options.credentials.portal) }]),
  );
  const samples = fc.sample(arbitrary as fc.Arbitrary<FuzzRequest | RawRequest>, {
    numRuns: options.count,
    seed: options.seed,
  });
  const sender = new Sender(options.origin);
  const report: FuzzReport = {
    requests: 0,
    byOperation: new Map(),
    byStatus: new Map(),
    findings: [],
  };
  let next = 0;
  const worker = async () => {
    for (;;) {
      const index = next++;
      if (index >= samples.length) return;
      if (options.deadline && Date.now() > options.deadline && index >= (options.minimum ?? 0))
        return;
      const sample = samples[index];
      let answer: Answer | null = null;
      try {
        answer =
          sample.operation === 'raw'
            ? await sender.sendRaw(sample as RawRequest)
            : await sender.send(sample as FuzzRequest);
      } catch (error) {
        report.findings.push({
          problem: `no answer: ${(error as Error).message}`,
          request: sample,
          answer: null,
        });
      }
      report.requests += 1;
      report.byOperation.set(sample.operation, (report.byOperation.get(sample.operation) ?? 0) + 1);
      if (answer) {
        report.byStatus.set(answer.status, (report.byStatus.get(answer.status) ?? 0) + 1);
        const problem = judge(sample, answer);
        if (problem) report.findings.push({ problem, request: sample, answer });
      }
      options.onProgress?.(report.requests);
    }
  };
  try {
    await Promise.all(Array.from({ length: options.concurrency ?? 8 }, worker));
  } finally {
    await sender.close();
  }
  return report;
}

/** A finding as a few lines a person can replay with curl. */
export function describeFinding(finding: Finding): string {
  const { request, answer } = finding;
  const sent =
    request.operation === 'raw'
      ? `raw: ${JSON.stringify((request as RawRequest).text.slice(0, 300))}`
      : `${(request as FuzzRequest).method} ${(request as FuzzRequest).url.slice(0, 300)}\n    headers: ${JSON.stringify((request as FuzzRequest).headers)}\n    body: ${JSON.stringify((request as FuzzRequest).body?.slice(0, 300))}`;
  const got = answer
    ? `${answer.status} ${String(answer.headers['content-type'] ?? '')} ${answer.body.slice(0, 300)}`
    : 'no answer';
  return `${finding.problem}\n    ${sent}\n    answer: ${got}`;
}
