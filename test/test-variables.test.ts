import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { portRange } from '../bench/processes.ts';

// Every variable the suite reads is in docs/development.md's table: a run on a shared machine
// (another Redis, another port range) is set up from the docs alone.

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** What the tests pass through or set for a child process, not settings of a run. */
const NOT_SETTINGS = new Set([
  'PATH',
  'HOME',
  // test/helpers/migrate-child.ts reads what its parent test gave it.
  'DATABASE_URL',
  'DATA_DIR',
  // The module recorder's file, set by the test that starts it.
  'MODULE_LOG',
  // The receiver snippet's key, set by the test that runs it in-process.
  'TOUROPS_SIGNING_KEYS',
  // Read by the programs test/sdk-package.test.ts and test/release.test.ts write for a clean
  // project, from the environment the test gives them.
  'TOKEN',
  'BASE_URL',
  'CASE',
]);

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && /\.(ts|mjs)$/.test(entry.name))
    .map((entry) => join(entry.parentPath, entry.name));
}

/** Names read as `process.env.NAME` or `process.env['NAME']` in `files`. */
function variablesRead(files: string[]): Set<string> {
  const names = new Set<string>();
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    for (const match of text.matchAll(
      /process\.env(?:\.([A-Z][A-Z0-9_]*)|\[['"]([A-Z0-9_]+)['"]\])/g,
    )) {
      names.add(match[1] ?? match[2]);
    }
  }
  return names;
}

describe('the variables the tests read', () => {
  it('are each in docs/development.md with a default, and nothing else is', () => {
    const files = [
      ...sources('test').filter((file) => !file.endsWith('test-variables.test.ts')),
      ...sources('src').filter((file) => file.endsWith('.test.ts')),
      join(ROOT, 'scripts', 'test.mjs'),
    ];
    // bench/processes.ts's freePort is the tests' too (its BENCH_ variables are the bench's).
    const benchTests = [...variablesRead([join(ROOT, 'bench', 'processes.ts')])].filter((name) =>
      name.startsWith('TEST_'),
    );
    const read = [...variablesRead(files), ...benchTests]
      .filter((name, i, all) => !NOT_SETTINGS.has(name) && all.indexOf(name) === i)
      .sort();
    const docs = readFileSync(join(ROOT, 'docs', 'development.md'), 'utf8');
    const table = docs.slice(
      docs.indexOf('**Sharing the machine**'),
      docs.indexOf('**Databases**'),
    );
    const documented = [...table.matchAll(/^\| ([^|]+) \|/gm)]
      .flatMap((row) => [...row[1].matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((name) => name[1]))
      .sort();
    assert.ok(read.includes('TEST_REDIS_URL') && read.includes('TEST_PORT_RANGE'), `${read}`);
    assert.deepEqual(documented, read);
  });

  it('take TEST_PORT_RANGE as <from>-<to>, and refuse a range that is not one', () => {
    assert.deepEqual(portRange(), { from: 20_000, to: 31_999 });
    assert.deepEqual(portRange('40000-40999'), { from: 40_000, to: 40_999 });
    for (const bad of ['40000', '40000-40010', '80-2000', '60000-70000', 'a-b']) {
      assert.throws(() => portRange(bad), /^Error: TEST_PORT_RANGE: /, bad);
    }
  });
});
