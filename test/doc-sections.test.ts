import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { TRANSFORMATION_LIMITS } from '../src/domain/transformation.ts';
import { withGeneratedSections } from '../src/http/reference/doc-sections.ts';

// The docs' generated sections: what the code renders, and the lint's check of them failing on a
// page whose section was edited by hand.

describe('generated sections of the docs', () => {
  const page = readFileSync('docs/transformations.md', 'utf8');

  it('docs/transformations.md holds the limits as the code declares them', () => {
    assert.equal(withGeneratedSections(page), page);
    assert.match(page, new RegExp(`\\| Time of one run \\| ${TRANSFORMATION_LIMITS.runMs} ms \\|`));
  });

  it('a section edited by hand is put back; an unknown one is refused', () => {
    const edited = page.replace(/\| Time of one run \| \d+ ms \|/, '| Time of one run | 5 s |');
    assert.notEqual(edited, page);
    assert.equal(withGeneratedSections(edited), page);
    assert.throws(
      () => withGeneratedSections('<!-- generated: nothing-such -->\n<!-- end generated -->'),
      /no generated section is named nothing-such/,
    );
  });

  it('the lint fails on a stale section and passes once it is written', () => {
    const root = mkdtempSync(join(tmpdir(), 'doc-sections-'));
    try {
      const docs = join(root, 'docs');
      mkdirSync(docs);
      writeFileSync(
        join(docs, 'page.md'),
        page.replace(/\| Time of one run \| \d+ ms \|/, '| Time of one run | 5 s |'),
      );
      const run = (...args: string[]) =>
        spawnSync('npx', ['tsx', 'scripts/doc-sections.ts', ...args], {
          encoding: 'utf8',
          env: { ...process.env, DOCS_DIR: docs },
        });
      const stale = run();
      assert.equal(stale.status, 1, stale.stderr);
      assert.match(stale.stderr, /out of date in docs\/page\.md/);
      assert.equal(run('--write').status, 0);
      assert.equal(run().status, 0);
      assert.equal(readFileSync(join(docs, 'page.md'), 'utf8'), page);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
