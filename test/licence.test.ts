import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { createTestContext, type TestContext } from './helpers/context.ts';

// One licence for the whole repository (contract.md, "Licence"), stated wherever a reader, a
// package registry or a legal team's scanner looks for it.

const ROOT = new URL('..', import.meta.url);
const read = (path: string) => readFileSync(new URL(path, ROOT), 'utf8');
const SPDX = 'Apache-2.0';

describe('the licence', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext('sqlite');
  });
  after(() => ctx.close());

  it('is the Apache License 2.0, in LICENSE at the root and named in the README', () => {
    const licence = read('LICENSE');
    assert.match(licence, /^\s*Apache License\s+Version 2\.0, January 2004/);
    assert.match(licence, /END OF TERMS AND CONDITIONS/);
    assert.match(read('README.md'), /Apache-2\.0 \(\[LICENSE\]\(LICENSE\)\)/);
  });

  it('is the SPDX identifier of every manifest', () => {
    assert.equal(JSON.parse(read('package.json')).license, SPDX);
    assert.equal(JSON.parse(read('sdk/package.json')).license, SPDX);
    assert.equal(JSON.parse(read('sdk/php/composer.json')).license, SPDX);
    const pyproject = read('sdk/python/pyproject.toml');
    assert.match(pyproject, /^license = \{ text = "Apache-2\.0" \}$/m);
    assert.match(pyproject, /"License :: OSI Approved :: Apache Software License"/);
    assert.doesNotMatch(
      [pyproject, read('sdk/php/composer.json'), read('sdk/package.json')].join('\n'),
      /proprietary/i,
    );
  });

  it('is info.license of both OpenAPI documents', async () => {
    const expected = { name: SPDX, identifier: SPDX };
    const publicDocument = (
      await ctx.app.inject({ method: 'GET', url: '/v1/openapi.json' })
    ).json();
    assert.deepEqual(publicDocument.info.license, expected);
    const adminDocument = (await ctx.adminRequest('GET', '/admin/v1/openapi.json')).json();
    assert.deepEqual(adminDocument.info.license, expected);
  });
});
