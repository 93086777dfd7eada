import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import SwaggerParser from '@apidevtools/swagger-parser';
import { ADMIN_TOKEN, createTestContext, type TestContext } from './helpers/context.ts';

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
    assert.equal(document.info.version, '1.1.0');
    assert.deepEqual(document.servers, [{ url: 'http://api.test' }]);
    assert.equal(document.components.securitySchemes.bearerAuth.scheme, 'bearer');
    await SwaggerParser.validate(structuredClone(document));
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
    assert.ok(document.components.schemas.Problem);
    assert.ok(
      !JSON.stringify(document).includes('/admin/'),
      'the admin API is not in the public document',
    );
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
