import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from './helpers/clock.ts';
import { ADMIN_TOKEN, BACKENDS, createTestContext, type TestContext } from './helpers/context.ts';
import { createTenant, createTrip, type TenantFixture } from './helpers/fixtures.ts';

const BUILT_IN_NAMES = ['toString', 'valueOf', 'hasOwnProperty', 'constructor', 'isPrototypeOf'];

interface Answer {
  statusCode: number;
  headers: Record<string, unknown>;
  body: string;
}

/** A problem+json answer of `status`, with the request id, leaking nothing internal. */
function assertProblem(response: Answer, status: number, label = ''): Record<string, unknown> {
  assert.equal(response.statusCode, status, `${label}: ${response.body}`);
  assert.match(String(response.headers['content-type']), /^application\/problem\+json/, label);
  assert.ok(response.headers['service-request-id'], `${label}: no Service-Request-Id`);
  assert.doesNotMatch(response.body, /FST_|is not a function|Error:|\bat \S+ \(/, label);
  return JSON.parse(response.body);
}

/** One raw HTTP/1.1 exchange on a fresh socket: what the server wrote until it closed. */
function rawExchange(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    socket.setTimeout(5_000, () => socket.destroy(new Error('no answer within 5 s')));
    socket.on('data', (chunk) => {
      received += chunk.toString('latin1');
    });
    socket.on('error', (error) => (received ? resolve(received) : reject(error)));
    socket.on('close', () => resolve(received));
    socket.write(request);
  });
}

function parseRaw(raw: string): Answer {
  const [head, ...rest] = raw.split('\r\n\r\n');
  const [statusLine, ...lines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { statusCode: Number(statusLine.split(' ')[1]), headers, body: rest.join('\r\n\r\n') };
}

for (const backend of BACKENDS) {
  describe(`hostile input (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    const clock = new ManualClock('2026-06-01T08:00:00.250Z');

    before(async () => {
      ctx = await createTestContext(backend, { clock });
      tenant = await createTenant(ctx);
    });
    after(() => ctx.close());

    const send = (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: string) =>
      ctx.app.inject({
        method,
        url,
        headers: {
          authorization: `Bearer ${tenant.token}`,
          ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
        },
        payload,
      });
    const clientCount = async () => {
      const page = await ctx.api('GET', '/api/v1/clients?limit=100', { token: tenant.token });
      return page.json().data.length as number;
    };

    it('treats members named like built-in properties as unknown members (422), in bodies and queries', async () => {
      for (const name of BUILT_IN_NAMES) {
        const body = await ctx.api('POST', '/api/v1/clients', {
          token: tenant.token,
          body: JSON.parse(`{"kind":"individual","displayName":"A","${name}":1}`),
        });
        const problem = assertProblem(body, 422, `body ${name}`);
        assert.deepEqual((problem.errors as Record<string, string[]>)[name], [
          'is not an allowed member',
        ]);
        for (const path of ['/api/v1/trips', '/api/v1/clients', '/api/v1/libraries/cities']) {
          const query = await ctx.api('GET', `${path}?${name}=1&limit=2`, { token: tenant.token });
          const queryProblem = assertProblem(query, 422, `${path} ${name}`);
          assert.ok((queryProblem.errors as Record<string, string[]>)[name], `${path} ${name}`);
        }
      }
      // __proto__ in a body is refused by the parser; in a query it is a name like any other.
      assertProblem(
        await send(
          'POST',
          '/api/v1/clients',
          '{"kind":"individual","displayName":"A","__proto__":{"x":1}}',
        ),
        422,
        'body __proto__',
      );
      assertProblem(await send('GET', '/api/v1/trips?__proto__=1'), 422, 'query __proto__');
      assertProblem(
        await ctx.adminRequest('POST', '/admin/v1/tenants', {
          name: 'x',
          slug: 'x-built-in',
          tier: 'pro',
          toString: 1,
        }),
        422,
        'admin body',
      );
    });

    it('refuses NUL characters the same way on both backends: 422 in bodies and queries, 404 in ids', async () => {
      const before = await clientCount();
      for (const payload of [
        '{"kind":"individual","displayName":"A\\u0000B"}',
        '{"kind":"individual","displayName":"A","tags":["ok","\\u0000"]}',
        '{"kind":"individual","displayName":"A","na\\u0000me":"x"}',
      ]) {
        assertProblem(await send('POST', '/api/v1/clients', payload), 422, payload);
      }
      const tagged = assertProblem(
        await send(
          'POST',
          '/api/v1/clients',
          '{"kind":"individual","displayName":"A","tags":["ok","a\\u0000"]}',
        ),
        422,
      );
      assert.ok((tagged.errors as Record<string, string[]>)['tags.1']);
      assert.equal(await clientCount(), before, 'nothing was created');

      const query = assertProblem(await send('GET', '/api/v1/libraries/cities?q=a%00b'), 422);
      assert.ok((query.errors as Record<string, string[]>).q);
      const trip = await createTrip(ctx, tenant);
      for (const url of [
        `/api/v1/trips/${trip.id}%00`,
        '/api/v1/trips/%00',
        `/api/v1/clients/cli_%00x`,
      ]) {
        assertProblem(await send('GET', url), 404, url);
      }
      assertProblem(await send('PATCH', `/api/v1/trips/${trip.id}%00`, '{"title":"x"}'), 404);
      assertProblem(await ctx.adminRequest('GET', `/admin/v1/tenants/${tenant.id}%00`), 404);
    });

    it('refuses what it could not keep as given, naming the member: surrogates, huge numbers, __proto__', async () => {
      const before = await clientCount();
      const cases: Array<[string, string, RegExp]> = [
        ['{"kind":"individual","displayName":"A\\ud800"}', 'displayName', /unpaired surrogate/],
        [
          '{"kind":"individual","displayName":"A","tags":["ok","\\udc00x"]}',
          'tags.1',
          /unpaired surrogate/,
        ],
        [
          '{"kind":"individual","displayName":"A","tags":["\\ud800"],"x\\udfff":1}',
          'x\udfff',
          /unpaired surrogate/,
        ],
        ['{"kind":"individual","displayName":"A","n":1e309}', 'n', /beyond the range of a double/],
        [
          '{"kind":"individual","displayName":"A","n":[-1E+400]}',
          'n.0',
          /beyond the range of a double/,
        ],
        [
          `{"kind":"individual","displayName":"A","n":{"m":${'9'.repeat(309)}}}`,
          'n.m',
          /beyond the range/,
        ],
        // Numbers a double holds as another: what would be stored and shown is not what was sent.
        [
          '{"kind":"individual","displayName":"A","n":9007199254740993}',
          'n',
          /kept and shown as 9007199254740992/,
        ],
        [
          '{"kind":"individual","displayName":"A","n":[1, {"m":18446744073709551617}]}',
          'n.1.m',
          /kept and shown as 18446744073709552000/,
        ],
        ['{"kind":"individual","displayName":"A","n":1e-400}', 'n', /kept and shown as 0/],
        [
          '{"kind":"individual","displayName":"A","n":0.1000000000000000000001}',
          'n',
          /kept and shown as 0.1/,
        ],
        [
          '{"kind":"individual","displayName":"A","meta":{"__proto__":{"x":1}}}',
          'meta.__proto__',
          /prototype/,
        ],
        [
          '{"kind":"individual","displayName":"A","constructor":{"prototype":{}}}',
          'constructor.prototype',
          /prototype/,
        ],
      ];
      for (const [payload, path, message] of cases) {
        const problem = assertProblem(await send('POST', '/api/v1/clients', payload), 422, payload);
        const errors = problem.errors as Record<string, string[]>;
        assert.ok(errors[path], `${payload}: ${JSON.stringify(errors)}`);
        assert.match(errors[path][0], message, payload);
      }
      // A surrogate pair is a character like any other.
      const emoji = await send(
        'POST',
        '/api/v1/clients',
        '{"kind":"individual","displayName":"A \\ud83d\\ude00"}',
      );
      assert.equal(emoji.statusCode, 201, emoji.body);
      assert.equal(emoji.json().data.displayName, 'A \u{1F600}');
      assert.equal(await clientCount(), before + 1, 'only the well-formed one was created');
      // A filter's number is refused on its path, the dry run's too: it never matches a 0.
      const filter = '{"data.totalRetailCents":{"$gt":1e-400}}';
      const dryRun = await send(
        'POST',
        '/api/v1/webhooks/filters/test',
        `{"filter":${filter},"event":{"type":"booking.confirmed","data":{"totalRetailCents":0}}}`,
      );
      const refused = assertProblem(dryRun, 422, filter).errors as Record<string, string[]>;
      assert.match(refused['filter.data.totalRetailCents.$gt']?.[0] ?? '', /kept and shown as 0/);
      // What a double holds as written is taken, however it is spelled.
      const kept = await send(
        'POST',
        '/api/v1/webhooks/filters/test',
        '{"filter":{"data.totalRetailCents":{"$in":[1e2, 150.0, 9007199254740992, -0]}},"event":{"type":"booking.confirmed","data":{"totalRetailCents":100}}}',
      );
      assert.equal(kept.statusCode, 200, kept.body);
    });

    it('bounds JSON nesting at parse time, with or without an Idempotency-Key', async () => {
      const deep = `${'['.repeat(5_000)}${']'.repeat(5_000)}`;
      const deepObject = `${'{"a":'.repeat(40)}1${'}'.repeat(40)}`;
      for (const payload of [
        deep,
        deepObject,
        `{"kind":"individual","displayName":"A","tags":${deep}}`,
      ]) {
        for (const key of [undefined, `deep-${Math.random()}`]) {
          const response = await ctx.app.inject({
            method: 'POST',
            url: '/api/v1/clients',
            headers: {
              authorization: `Bearer ${tenant.token}`,
              'content-type': 'application/json',
              ...(key ? { 'idempotency-key': key } : {}),
            },
            payload,
          });
          const problem = assertProblem(response, 422, `key ${key}`);
          assert.ok((problem.errors as Record<string, string[]>).body);
        }
      }
      // Brackets inside strings are text, not nesting.
      const created = await send(
        'POST',
        '/api/v1/clients',
        JSON.stringify({ kind: 'individual', displayName: '['.repeat(100) }),
      );
      assert.equal(created.statusCode, 201, created.body);
    });

    it('bounds every integer of the admin tenant body (Infinity, beyond 32 bits, negative)', async () => {
      for (const member of ['tripQuota', 'webhookEndpointCap']) {
        for (const value of ['1e309', '3000000000', '2147483648', '-1', '1.5', '-1e309']) {
          const response = await ctx.app.inject({
            method: 'PATCH',
            url: `/admin/v1/tenants/${tenant.id}`,
            headers: {
              authorization: `Bearer ${ctx.env.ADMIN_API_TOKEN}`,
              'content-type': 'application/json',
            },
            payload: `{"${member}":${value}}`,
          });
          const problem = assertProblem(response, 422, `${member}=${value}`);
          assert.ok((problem.errors as Record<string, string[]>)[member], `${member}=${value}`);
        }
      }
      const tenantRead = await ctx.adminRequest('GET', `/admin/v1/tenants/${tenant.id}`);
      assert.equal(tenantRead.statusCode, 200);
      const me = await ctx.api('GET', '/api/v1/me', { token: tenant.token });
      assert.equal(me.statusCode, 200);
    });

    it('takes numeric query parameters as plain decimal integers only', async () => {
      for (const limit of [
        '0x5',
        '1e1',
        '%205',
        '5%20',
        '',
        '+5',
        '5.0',
        '0b11',
        'Infinity',
        '99999999999999999999',
      ]) {
        const problem = assertProblem(
          await send('GET', `/api/v1/trips?limit=${limit}`),
          422,
          limit,
        );
        assert.ok((problem.errors as Record<string, string[]>).limit, limit);
      }
      const fine = await ctx.api('GET', '/api/v1/trips?limit=5', { token: tenant.token });
      assert.equal(fine.statusCode, 200);
    });

    it('compares publishedAt[gte] as instants, whatever the spelling of the bound', async () => {
      const t = await createTenant(ctx);
      const trip = await createTrip(ctx, t);
      clock.set('2026-06-01T08:00:00.250Z');
      await ctx.admin('POST', `/admin/v1/trips/${trip.id}/publish`);
      const ids = async (bound: string) => {
        const response = await ctx.api(
          'GET',
          `/api/v1/trips?publishedAt[gte]=${encodeURIComponent(bound)}`,
          { token: t.token },
        );
        assert.equal(response.statusCode, 200, `${bound}: ${response.body}`);
        return response.json().data.map((row: { id: string }) => row.id);
      };
      for (const bound of [
        '2026-06-01T08:00:00Z', // no milliseconds
        '2026-06-01T08:00:00.250Z', // the instant itself
        '2026-06-01T22:00:00.250+14:00', // the same instant, another offset
        '2026-06-01T05:30:00.25-02:30',
        '2026-06-01t08:00:00.250z', // lower case
        '2026-06-01T08:00:00.2509Z', // finer than stored: cut, never rounded up
        '0001-01-01T00:00:00Z',
      ]) {
        assert.deepEqual(await ids(bound), [trip.id], bound);
      }
      for (const bound of [
        '2026-06-01T08:00:00.251Z',
        '2026-06-01T22:00:01+14:00',
        '2026-06-01t08:00:01z',
        '9999-12-31T23:59:59.999-14:00', // past year 9999 in UTC
      ]) {
        assert.deepEqual(await ids(bound), [], bound);
      }
      for (const bound of ['2026-02-30T00:00:00Z', '2026-06-01T24:00:00Z', 'yesterday']) {
        const response = await send('GET', `/api/v1/trips?publishedAt[gte]=${bound}`);
        assertProblem(response, 422, bound);
      }
    });

    it('checks country and currency codes against the real lists', async () => {
      const create = (body: Record<string, unknown>) =>
        ctx.api('POST', '/api/v1/clients', {
          token: tenant.token,
          body: { kind: 'company', displayName: 'Codes', ...body },
        });
      for (const [field, value] of [
        ['countryIso', 'ZZ'],
        ['countryIso', 'UK'],
        ['countryIso', 'XY'],
        ['currency', 'XYZ'],
        ['currency', 'ABC'],
      ]) {
        const problem = assertProblem(await create({ [field]: value }), 422, value);
        assert.ok((problem.errors as Record<string, string[]>)[field], value);
      }
      const ok = await create({ countryIso: 'gb', currency: 'chf' });
      assert.equal(ok.statusCode, 201, ok.body);
      assert.equal(ok.json().data.countryIso, 'GB');
      assert.equal(ok.json().data.currency, 'CHF');
      const city = await ctx.adminRequest('POST', `/admin/v1/tenants/${tenant.id}/library/cities`, {
        name: 'Nowhere',
        countryIso: 'ZZ',
      });
      assertProblem(city, 422, 'admin city');
    });

    it('refuses webhook URLs that other parsers would read another host from', async () => {
      // Had the guard regressed, the subscription would point at a public address: no worker runs
      // here, and it names an event this file never emits.
      for (const url of ['https://user:pass@127.0.0.1:9/', 'https://1.1.1.1\\@127.0.0.1:9/hook']) {
        const response = await ctx.api('POST', '/api/v1/webhooks', {
          token: tenant.token,
          body: { url, events: ['dispute.opened'] },
        });
        const problem = assertProblem(response, 422, url);
        assert.ok((problem.errors as Record<string, string[]>).url, url);
      }
    });

    describe('over real HTTP', () => {
      let port: number;
      before(async () => {
        await ctx.app.listen({ host: '127.0.0.1', port: 0 });
        port = (ctx.app.server.address() as { port: number }).port;
      });

      const get = (path: string, extra = '') =>
        rawExchange(
          port,
          `GET ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${tenant.token}\r\n${extra}Connection: close\r\n\r\n`,
        );

      it('answers undecodable paths and over-long ids 404 problem+json with the request id', async () => {
        for (const path of [
          '/api/v1/trips/%E0%A4%A',
          '/api/v1/trips/%ff',
          '/api/v1/trips/%ED%A0%80',
          `/api/v1/trips/trp_${'A'.repeat(250)}`,
          '/api/v1/%E0%A4%A/trips',
        ]) {
          const answer = parseRaw(await get(path));
          const problem = assertProblem(answer, 404, path);
          assert.doesNotMatch(answer.body, /%E0|%ff|AAAAAAAAAA/i, 'the path is not echoed');
          assert.equal(problem.status, 404);
        }
      });

      it('answers what the HTTP parser rejects as problem+json, with Connection: close', async () => {
        const cases: Array<[string, number]> = [
          [`FOO /api/v1/trips HTTP/1.1\r\nHost: x\r\n\r\n`, 404],
          [`GET /api/v1/trips HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(17_000)}\r\n\r\n`, 431],
          [`GET /api/v1/trips?q=${'a'.repeat(17_000)} HTTP/1.1\r\nHost: x\r\n\r\n`, 431],
          [`GET /api/v1/trips HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n`, 422],
          [`GET /api/v1/trips HTTP/1.1\r\nAccept: */*\r\n\r\n`, 422],
          [`POST /api/v1/clients HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}`, 422],
          [
            `GET /api/v1/trips HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n`,
            422,
          ],
        ];
        for (const [request, status] of cases) {
          const answer = parseRaw(await rawExchange(port, request));
          assertProblem(answer, status, request.slice(0, 30));
          assert.equal(answer.headers.connection, 'close', request.slice(0, 30));
        }
      });

      it('keeps a keep-alive connection usable after an error answer it does not close', async () => {
        const raw = await rawExchange(
          port,
          `GET /api/v1/trips/%ff HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${tenant.token}\r\n\r\n` +
            `GET /api/v1/trips?limit=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${tenant.token}\r\nConnection: close\r\n\r\n`,
        );
        const statuses = [...raw.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => match[1]);
        assert.deepEqual(statuses, ['404', '200']);
      });
    });
  });
}

describe('admin API behind the per-IP guard', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext('sqlite', { env: { RATE_LIMIT_IP_PER_MIN: '5' } });
  });
  after(() => ctx.close());

  it('counts wrong admin tokens like any request from the address', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      const response = await ctx.adminRequest(
        'GET',
        '/admin/v1/tenants/ten_x',
        undefined,
        `wrong-${i}`,
      );
      statuses.push(response.statusCode);
      if (response.statusCode === 429) {
        assertProblem(response, 429);
        assert.equal(response.headers['x-ratelimit-scope'], 'ip');
        assert.ok(Number(response.headers['retry-after']) >= 1);
      }
    }
    assert.deepEqual(statuses, [401, 401, 401, 401, 401, 429, 429, 429]);
  });
});

describe('integer bounds in both OpenAPI documents', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext('sqlite');
  });
  after(() => ctx.close());

  interface Schema {
    $ref?: string;
    type?: string | string[];
    minimum?: number;
    maximum?: number;
    properties?: Record<string, Schema>;
    items?: Schema;
    anyOf?: Schema[];
    oneOf?: Schema[];
    allOf?: Schema[];
  }
  interface Operation {
    parameters?: Array<{ in: string; name: string; schema: Schema }>;
    requestBody?: { content?: Record<string, { schema: Schema }> };
  }
  interface Document {
    paths: Record<string, Record<string, Operation>>;
    components?: { schemas?: Record<string, Schema> };
  }

  /** Paths (`PATCH /x body.tripQuota`) of numbers a client sends that lack either bound. */
  function unbounded(document: Document): string[] {
    const found: string[] = [];
    const resolve = (schema: Schema): Schema | undefined =>
      schema.$ref ? document.components?.schemas?.[schema.$ref.split('/').pop() ?? ''] : schema;
    const walk = (schema: Schema | undefined, where: string): void => {
      const resolved = schema && resolve(schema);
      if (!resolved) return;
      const types = [resolved.type].flat();
      if (types.includes('integer') || types.includes('number')) {
        if (typeof resolved.minimum !== 'number' || typeof resolved.maximum !== 'number') {
          found.push(where);
        }
      }
      for (const [name, property] of Object.entries(resolved.properties ?? {})) {
        walk(property, `${where}.${name}`);
      }
      walk(resolved.items, `${where}[]`);
      for (const member of [
        ...(resolved.anyOf ?? []),
        ...(resolved.oneOf ?? []),
        ...(resolved.allOf ?? []),
      ]) {
        walk(member, where);
      }
    };
    for (const [path, operations] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        const name = `${method.toUpperCase()} ${path}`;
        for (const parameter of operation.parameters ?? []) {
          walk(parameter.schema, `${name} ${parameter.in}.${parameter.name}`);
        }
        for (const media of Object.values(operation.requestBody?.content ?? {})) {
          walk(media.schema, `${name} body`);
        }
      }
    }
    return found;
  }

  it('gives every integer a client sends a minimum and a maximum', async () => {
    const publicDoc = (await ctx.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
    const adminDoc = (await ctx.adminRequest('GET', '/admin/v1/openapi.json')).json();
    assert.ok(Object.keys(adminDoc.paths).length > 10);
    assert.deepEqual(unbounded(publicDoc), []);
    assert.deepEqual(unbounded(adminDoc), []);
  });
});

describe('query strings on every route of both OpenAPI documents', () => {
  let ctx: TestContext;
  let token: string;
  let tripId: string;
  before(async () => {
    ctx = await createTestContext('sqlite');
    const tenant = await createTenant(ctx, { tier: 'enterprise' });
    token = tenant.token;
    tripId = (await createTrip(ctx, tenant)).id;
    await ctx.admin('POST', `/admin/v1/trips/${tripId}/publish`);
  });
  after(() => ctx.close());

  interface Operation {
    parameters?: Array<{ in: string; name: string }>;
    requestBody?: { content?: Record<string, { example?: unknown; examples?: object }> };
  }
  /** A body an operation takes, from its document's example (valid: its query is checked next). */
  const exampleBody = (operation: Operation) => {
    const media = operation.requestBody?.content?.['application/json'];
    if (media === undefined) return undefined;
    const example =
      media.example ?? (Object.values(media.examples ?? {})[0] as { value?: unknown })?.value;
    // A trip of the tenant: POST /api/v1/bookings answers an unknown one 404 before any 422.
    const value = (example ?? {}) as Record<string, unknown>;
    return JSON.stringify('tripId' in value ? { ...value, tripId } : value);
  };
  /** Each operation of a document, its path's parameters filled with an id of nothing. */
  const operations = (document: { paths: Record<string, Record<string, Operation>> }) =>
    Object.entries(document.paths).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, operation]) => ({
        method: method.toUpperCase() as 'GET',
        url: path.replace(/\{[^}]+\}/g, 'nothing_1'),
        query: (operation.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name),
        body: exampleBody(operation),
      })),
    );

  // Fastify checks a body before the query string: each body is its operation's example.
  it('answers an unknown parameter, and a NUL in one, 422 on every operation', async () => {
    const publicDoc = (await ctx.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
    const adminDoc = (await ctx.adminRequest('GET', '/admin/v1/openapi.json')).json();
    const all = [...operations(publicDoc), ...operations(adminDoc)];
    assert.ok(all.length > 50, `${all.length} operations`);
    const wrong: string[] = [];
    for (const { method, url, query, body } of all) {
      const authorization = `Bearer ${url.startsWith('/admin/') ? ADMIN_TOKEN : token}`;
      const named = query[0] ?? 'anything';
      for (const [search, member] of [
        ['unknownParameter=1', 'unknownParameter'],
        [`${named}=a%00b`, named],
      ]) {
        const response = await ctx.app.inject({
          method,
          url: `${url}?${search}`,
          headers: {
            authorization,
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          ...(body === undefined ? {} : { payload: body }),
        });
        const errors = response.statusCode === 422 ? response.json().errors : undefined;
        if (errors?.[member] === undefined) {
          wrong.push(
            `${method} ${url}?${search}: ${response.statusCode} ${response.body.slice(0, 120)}`,
          );
        }
      }
    }
    assert.deepEqual(wrong, []);
  });
});
