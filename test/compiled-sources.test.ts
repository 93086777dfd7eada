import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ROOT } from './helpers/processes.ts';

/**
 * A copy of the project's code beside the real one, its node_modules a directory of links to the
 * real packages (so its build cache is its own): what bin/compiled.js does with changed sources
 * and with a cache it cannot write, without touching the checkout the other suites run.
 */
describe('the compiled sources (bin/compiled.js)', () => {
  let copy: string;
  const cache = () => join(copy, 'node_modules', '.cache');
  const help = () => {
    const run = spawnSync(process.execPath, [join(copy, 'bin', 'tourops.js'), '--help'], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '' },
      timeout: 60_000,
    });
    assert.equal(run.status, 0, run.stderr);
    assert.equal(run.stderr, '');
    return run.stdout;
  };

  before(() => {
    copy = mkdtempSync(join(tmpdir(), 'tourops-compiled-'));
    for (const name of ['bin', 'src'])
      cpSync(join(ROOT, name), join(copy, name), { recursive: true });
    for (const name of ['package.json', 'package-lock.json', 'tsconfig.json']) {
      cpSync(join(ROOT, name), join(copy, name));
    }
    mkdirSync(join(copy, 'node_modules'));
    for (const name of readdirSync(join(ROOT, 'node_modules'))) {
      if (name !== '.cache')
        symlinkSync(join(ROOT, 'node_modules', name), join(copy, 'node_modules', name));
    }
  });
  after(() => rmSync(copy, { recursive: true, force: true }));

  it('builds once, and runs a changed source at the next start', () => {
    assert.match(help(), /^Usage: tourops <command>/);
    const builds = () => readdirSync(join(cache(), 'tourops'));
    assert.equal(builds().length, 1);
    help();
    assert.equal(builds().length, 1, 'the second start reuses the build');

    const source = join(copy, 'src', 'cli', 'help.ts');
    writeFileSync(
      source,
      readFileSync(source, 'utf8').replace(
        'Usage: tourops <command>',
        'Usage: tourops-changed <command>',
      ),
    );
    assert.match(help(), /^Usage: tourops-changed <command>/);
    assert.equal(builds().length, 2);
  });

  it('runs the sources through tsx where the build cannot be written', () => {
    rmSync(cache(), { recursive: true, force: true });
    // A file where the cache directory would be: nothing can be built under it.
    writeFileSync(cache(), '');
    assert.match(help(), /^Usage: tourops-changed <command>/);
    assert.ok(existsSync(cache()));
  });
});
