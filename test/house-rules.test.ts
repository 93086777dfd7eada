import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  cpSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { checkHouseRules } from '../scripts/house-rules.ts';
import { ROOT } from './helpers/processes.ts';

// The written rules `npm run lint` enforces, each shown to fail on a fixture: a copy of today's
// src/ passes, and the same copy with one fixture added fails naming the fixture.

const FIXTURES = join(ROOT, 'test', 'fixtures', 'house-rules');
const lines = (n: number) =>
  `${Array.from({ length: n }, (_, i) => `export const x${i} = ${i};`).join('\n')}\n`;

describe('house rules (npm run lint)', () => {
  let root: string;
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'tourops-rules-'));
    cpSync(join(ROOT, 'src'), join(root, 'src'), { recursive: true });
    copyFileSync(join(ROOT, 'tsconfig.json'), join(root, 'tsconfig.json'));
    symlinkSync(join(ROOT, 'node_modules'), join(root, 'node_modules'));
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  /** The copy of src/ with `files` added, the faults found, and the copy restored. */
  const withFiles = <T>(files: Record<string, string>, check: () => T): T => {
    for (const [name, text] of Object.entries(files)) writeFileSync(join(root, name), text);
    try {
      return check();
    } finally {
      for (const name of Object.keys(files)) rmSync(join(root, name));
    }
  };
  const depcruise = () =>
    spawnSync(
      join(ROOT, 'node_modules', '.bin', 'depcruise'),
      ['src', '--config', join(ROOT, '.dependency-cruiser.cjs')],
      { cwd: root, encoding: 'utf8' },
    );

  it('are all run by npm run lint', () => {
    const lint = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts.lint;
    assert.match(lint, /tsx scripts\/house-rules\.ts/);
    assert.match(lint, /depcruise src --config \.dependency-cruiser\.cjs/);
  });

  it("hold on today's src/", () => {
    assert.deepEqual(checkHouseRules(root), []);
    const cruise = depcruise();
    assert.equal(cruise.status, 0, cruise.stdout + cruise.stderr);
  });

  it('refuse a file in src/ over 600 lines, and one in src/delivery/ over 400', () => {
    assert.deepEqual(
      withFiles({ 'src/lib/long.ts': lines(600), 'src/delivery/long.ts': lines(400) }, () =>
        checkHouseRules(root),
      ),
      [],
      'the limits themselves are allowed',
    );
    assert.deepEqual(
      withFiles({ 'src/lib/long.ts': lines(601), 'src/delivery/long.ts': lines(401) }, () =>
        checkHouseRules(root),
      ),
      [
        'src/delivery/long.ts: 401 lines, over the 400 a file in src/delivery/ may have',
        'src/lib/long.ts: 601 lines, over the 600 a file in src/ may have',
      ].sort(),
    );
  });

  it('refuse a delivery status spelled in a repository or the engine, in code or in SQL', () => {
    const literal = readFileSync(join(FIXTURES, 'status-literal-repository.ts.fixture'), 'utf8');
    const sqlLiteral =
      "import { sql } from 'kysely';\nexport const running = sql`status = 'pending'`;\n";
    const faults = withFiles(
      {
        'src/repositories/fixture-repository.ts': literal,
        'src/delivery/fixture-sql.ts': sqlLiteral,
      },
      () => checkHouseRules(root),
    );
    assert.equal(faults.length, 2, faults.join('\n'));
    assert.match(faults[0], /^src\/delivery\/fixture-sql\.ts:2: the delivery status 'pending'/);
    assert.match(faults[1], /^src\/repositories\/fixture-repository\.ts:9: .*'in_flight'/);
    // A status in a comment is prose, not a spelling the compiler should own.
    const comment = "// a row goes 'pending' → 'in_flight'\nexport const a = 1;\n";
    assert.deepEqual(
      withFiles({ 'src/delivery/fixture-comment.ts': comment }, () => checkHouseRules(root)),
      [],
    );
  });

  it('refuse an import from the engine (src/delivery/) up to an entry point (runtime.ts)', () => {
    const fixture = readFileSync(join(FIXTURES, 'delivery-imports-runtime.ts.fixture'), 'utf8');
    const cruise = withFiles({ 'src/delivery/fixture.ts': fixture }, depcruise);
    assert.notEqual(cruise.status, 0);
    const report = cruise.stdout + cruise.stderr;
    assert.match(
      report,
      /engine-never-imports-an-entry-point: src\/delivery\/fixture\.ts → src\/runtime\.ts/,
    );
    assert.match(
      report,
      /delivery-imports-only-below: src\/delivery\/fixture\.ts → src\/runtime\.ts/,
    );
  });
});
