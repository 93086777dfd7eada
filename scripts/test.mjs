// `npm test` and `npm run test:unit`: bundles the test files with esbuild, then runs the bundles
// under node's test runner. Each test file runs in a process of its own; loading one bundle
// (its sources compiled once for the whole run) costs a fraction of compiling every source
// module through tsx in every one of those processes, and the suite is bound by CPU.
// Plain JavaScript, so that it runs before anything is compiled.
//
//   node scripts/test.mjs [file or directory …] [node --test option …]
//
// Without a file: every suite (test/*.test.ts and src/**/*.test.ts). A directory: the test files
// under it. Options starting with `--` go to node's test runner (`--test-name-pattern=…`,
// `--test-reporter=spec`). One file through tsx, without a build, works as before:
// `node --import tsx --test test/trips.test.ts`.
import { spawn } from 'node:child_process';
import { readdirSync, rmSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
// As bin/compiled.js bundles: `import.meta.url` in a source file stays that file's URL, so tests
// find fixtures, docs and bin/ relative to where they live, not to the bundle.
import { BUNDLE_OPTIONS } from '../bin/compiled.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CACHE = join(ROOT, 'node_modules', '.cache', 'tourops-tests');
const DEFAULT_FILES = ['test', 'src'];
/** Test files directly in test/ (its subfolders hold helpers and fixtures), any depth in src/. */
const TEST_FILE = /\.test\.ts$/;
/**
 * The longest files, longest first (by their tests' time in a full run on 2 cores). Node's
 * runner starts files in the order of their names, so their bundles are named to start first: a
 * run then ends on short files running side by side, not on a long one running alone. A file
 * missing here only starts in its alphabetical place.
 */
const LONGEST_FIRST = [
  'test/printed-hints.test.ts',
  'test/portal-browser.test.ts',
  'test/webhook-workers.test.ts',
  'test/webhook-flow-control.test.ts',
  'test/several-machines.test.ts',
  'test/fuzz.test.ts',
  'test/races.test.ts',
  'test/retention.test.ts',
  'test/webhook-brokers.test.ts',
  'test/release.test.ts',
  'test/dependency-faults.test.ts',
  'test/scale-out-workers.test.ts',
  'test/reference-page.test.ts',
  'test/processes.test.ts',
  'test/verifier-packages.test.ts',
  'test/crash-loops.test.ts',
  'test/sdk-package.test.ts',
  'test/mirroring.test.ts',
  'test/steady-heap.test.ts',
  'test/stalled-loop.test.ts',
  'test/cli.test.ts',
  'test/webhook-receiver-auth.test.ts',
  'test/lifecycle.test.ts',
  'test/worker-probes.test.ts',
  'test/worker-fairness.test.ts',
  'test/scale-out.test.ts',
];

const options = process.argv.slice(2).filter((arg) => arg.startsWith('--'));
const named = process.argv.slice(2).filter((arg) => !arg.startsWith('--'));
const files = (named.length > 0 ? named : DEFAULT_FILES).flatMap(testFiles).sort();
if (files.length === 0) {
  console.error(`no test file in ${named.join(' ')}`);
  process.exit(2);
}

// A directory of this run's own: two runs at once (two clones, a run beside a bench) never
// share one, and nothing of an older run's sources is ever loaded.
const outdir = join(CACHE, String(process.pid));
rmSync(outdir, { recursive: true, force: true });
const bundleName = (file) => {
  const name = relative(ROOT, file).replace(/\.ts$/, '');
  const rank = LONGEST_FIRST.indexOf(relative(ROOT, file));
  return rank < 0 ? `~/${name}` : `${String(rank).padStart(2, '0')}/${name}`;
};
await build({
  entryPoints: files.map((file) => ({ in: file, out: bundleName(file) })),
  outdir,
  ...BUNDLE_OPTIONS,
  logLevel: 'warning',
});

const bundles = files.map((file) => join(outdir, `${bundleName(file)}.js`));
const child = spawn(
  process.execPath,
  [
    // Stacks and failures name the source files and lines (esbuild's linked source maps).
    '--enable-source-maps',
    '--test',
    // Files spend part of their time waiting on the processes, brokers and timers they test:
    // three at once keep two cores busy where two left them idle.
    '--test-concurrency=3',
    '--test-timeout=300000',
    ...reporters(options),
    ...options,
    ...bundles,
  ],
  { cwd: ROOT, stdio: 'inherit' },
);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => child.kill(signal));
}
child.on('exit', (code, signal) => {
  rmSync(outdir, { recursive: true, force: true });
  process.exitCode = code ?? (signal ? 1 : 0);
});

/**
 * Where the output is not a terminal (CI, a log), TAP as before and, on stderr, each failure again
 * at the end (scripts/failures-reporter.mjs); a terminal keeps the runner's own choice, whose spec
 * reporter lists failures itself. A run naming its own reporter keeps only that.
 */
function reporters(given) {
  if (process.stdout.isTTY || given.some((arg) => arg.startsWith('--test-reporter'))) return [];
  const failures = join(ROOT, 'scripts', 'failures-reporter.mjs');
  return [
    '--test-reporter=tap',
    '--test-reporter-destination=stdout',
    `--test-reporter=${failures}`,
    '--test-reporter-destination=stderr',
  ];
}

function testFiles(name) {
  const path = resolve(name);
  if (!statSync(path).isDirectory()) return [path];
  const underTest = relative(ROOT, path) === 'test';
  return readdirSync(path, { recursive: !underTest, withFileTypes: true })
    .filter((entry) => entry.isFile() && TEST_FILE.test(entry.name))
    .map((entry) => join(entry.parentPath ?? entry.path, entry.name));
}
