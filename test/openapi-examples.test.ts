import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { EVENT_TYPES } from '../src/domain/states.ts';
import { ADMIN_TOKEN, createTestContext, type TestContext } from './helpers/context.ts';

// Every body and every 2xx/4xx answer of both served documents carries an example, and every
// example is valid against the schema beside it: examples cannot rot into lies.

type Media = { schema?: unknown; example?: unknown; examples?: Record<string, { value: unknown }> };
type Operation = {
  requestBody?: { content?: Record<string, Media> };
  responses?: Record<string, { content?: Record<string, Media> }>;
};
type OpenApi = {
  paths: Record<string, Record<string, Operation>>;
  webhooks?: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, { examples?: unknown[] }> };
};

const pointer = (...parts: string[]) =>
  `#/${parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`;

function checkDocument(document: OpenApi, name: string): string[] {
  const ajv = new Ajv2020.default({ strict: false, allErrors: true });
  addFormats.default(ajv);
  ajv.addSchema(document as object, name);
  const problems: string[] = [];
  const check = (where: string[], media: Media, required: boolean) => {
    const values =
      media.example !== undefined
        ? [media.example]
        : Object.values(media.examples ?? {}).map((e) => e.value);
    if (values.length === 0) {
      if (required) problems.push(`${where.join(' ')}: no example`);
      return;
    }
    // The generator's last resort: a placeholder, not what a client would see.
    if (JSON.stringify(values).includes('"text"')) problems.push(`${where.join(' ')}: placeholder`);
    const validate = ajv.getSchema(`${name}${pointer(...where, 'schema')}`);
    if (!validate) return problems.push(`${where.join(' ')}: no schema`);
    for (const value of values) {
      if (!validate(value)) {
        problems.push(`${where.join(' ')}: ${ajv.errorsText(validate.errors)}`);
      }
    }
  };
  for (const section of ['paths', 'webhooks'] as const) {
    for (const [path, methods] of Object.entries(document[section] ?? {})) {
      for (const [method, operation] of Object.entries(methods)) {
        for (const [type, media] of Object.entries(operation.requestBody?.content ?? {})) {
          check([section, path, method, 'requestBody', 'content', type], media, true);
        }
        for (const [status, response] of Object.entries(operation.responses ?? {})) {
          for (const [type, media] of Object.entries(response.content ?? {})) {
            const required = /^[24]/.test(status);
            check([section, path, method, 'responses', status, 'content', type], media, required);
          }
        }
      }
    }
  }
  for (const [schemaName, schema] of Object.entries(document.components?.schemas ?? {})) {
    const validate = ajv.getSchema(`${name}${pointer('components', 'schemas', schemaName)}`);
    for (const example of schema.examples ?? []) {
      if (validate && !validate(example)) {
        problems.push(`component ${schemaName}: ${ajv.errorsText(validate.errors)}`);
      }
    }
  }
  return problems;
}

describe('examples in the OpenAPI documents', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext('sqlite');
  });
  after(() => ctx.close());

  for (const [name, url] of [
    ['public', '/v1/openapi.json'],
    ['admin', '/admin/v1/openapi.json'],
  ] as const) {
    it(`every body and 2xx/4xx answer of the ${name} document has a valid example`, async () => {
      const response = await ctx.app.inject({
        url,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      });
      const document = response.json() as OpenApi;
      assert.deepEqual(checkDocument(document, `${name}.json`), []);
      if (name === 'public') {
        assert.equal(Object.keys(document.webhooks ?? {}).length, EVENT_TYPES.length);
      }
    });
  }
});
