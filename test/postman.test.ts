import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestContext, type TestContext } from './helpers/context.ts';

interface Item {
  name: string;
  item?: Item[];
  request?: { method: string; url: { raw?: string } | string };
}

const requests = (items: Item[]): Item[] =>
  items.flatMap((item) => (item.item ? requests(item.item) : [item]));

describe('the Postman collection', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext('sqlite');
  });
  after(() => ctx.close());

  it('holds every operation of the public document, in a folder per tag, with the token as a variable', async () => {
    const response = await ctx.app.inject({ url: '/v1/postman.json' });
    assert.equal(response.statusCode, 200);
    assert.match(String(response.headers['content-type']), /^application\/json/);
    const collection = response.json();
    assert.match(collection.info.schema, /collection\/v2\.1\.0/);
    assert.deepEqual(collection.auth, {
      type: 'bearer',
      bearer: [{ key: 'token', value: '{{bearerToken}}', type: 'any' }],
    });
    const variables = Object.fromEntries(
      collection.variable.map((v: { key: string; value: string }) => [v.key, v.value]),
    );
    assert.equal(variables.bearerToken, '');
    assert.equal(variables.baseUrl, 'http://api.test');

    const document = (await ctx.app.inject({ url: '/v1/openapi.json' })).json();
    const operations = Object.entries(document.paths as Record<string, object>).flatMap(
      ([path, methods]) => Object.keys(methods).map((m) => `${m.toUpperCase()} ${path}`),
    );
    const all = requests(collection.item);
    assert.equal(all.length, operations.length);
    assert.deepEqual(
      collection.item.map((folder: Item) => folder.name).sort(),
      document.tags.map((tag: { name: string }) => tag.name).sort(),
    );
    // Requests carry the documented examples as their bodies.
    const createTrip = all.find((item) => item.name === 'Create a trip') as Item & {
      request: { body?: { raw?: string } };
    };
    assert.match(createTrip.request.body?.raw ?? '', /Lisbon and Porto in spring/);
    // Built once, then served as is.
    const again = await ctx.app.inject({ url: '/v1/postman.json' });
    assert.equal(again.body, response.body);
  });
});
