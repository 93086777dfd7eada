// `npm run release`: every package of this release, built into dist/ as its registry would serve
// it (contract.md, "Releases"); the version is package.json's, and every manifest must say the same.
//
//   npm run release                      the artifacts of package.json's version, into dist/
//   npm run release -- --out <dir>       into another directory (the release test's)
//   npm run release -- --version <v>     the release commit's first step: <v> into every manifest
//
// Offline: npm packs the SDK, Debian's Python (pip, setuptools, wheel) builds the wheel and the
// sdist, and the Go module and the Composer artifact are zipped by Python's zipfile.
import { execFileSync } from 'node:child_process';
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PYTHON = process.env.RELEASE_PYTHON ?? '/usr/bin/python3';
/** The Go module's path, as its go.mod declares it. */
export const GO_MODULE = 'tourops.example/tourops';

/** Where each package states its version (the Go module's is its tag, given at release). */
const MANIFESTS = {
  'sdk/package.json': /^( {2}"version": ")([^"]+)(",)$/m,
  'sdk/python/pyproject.toml': /^(version = ")([^"]+)(")$/m,
  'sdk/php/composer.json': /^( {2}"version": ")([^"]+)(",)$/m,
} as const;

const SEMVER = /^\d+\.\d+\.\d+$/;

const reader = (root: string) => (path: string) => readFileSync(join(root, path), 'utf8');

/** package.json's version (in the checkout at `root`), checked against every manifest's. */
export function releaseVersion(root = ROOT): string {
  const read = reader(root);
  const version = JSON.parse(read('package.json')).version as string;
  for (const [path, pattern] of Object.entries(MANIFESTS)) {
    const found = pattern.exec(read(path))?.[2];
    if (found !== version) {
      throw new Error(`${path} says version ${found ?? '(none)'}; package.json says ${version}`);
    }
  }
  return version;
}

/**
 * The release commit's first step: `version` in package.json and every manifest of the checkout
 * at `root`, and in package-lock.json unless `lock` is false.
 */
export function setVersion(version: string, root = ROOT, lock = true): void {
  if (!SEMVER.test(version))
    throw new Error(`--version ${version}: must be <major>.<minor>.<patch>`);
  const read = reader(root);
  const files: Array<[string, RegExp]> = [
    ['package.json', /^( {2}"version": ")([^"]+)(",)$/m],
    ...(Object.entries(MANIFESTS) as Array<[string, RegExp]>),
  ];
  for (const [path, pattern] of files) {
    writeFileSync(join(root, path), read(path).replace(pattern, `$1${version}$3`));
  }
  if (!lock) return;
  execFileSync('npm', ['install', '--package-lock-only', '--ignore-scripts', '--no-audit'], {
    cwd: root,
    stdio: 'inherit',
  });
}

/** A zip of `entries` (its name in the zip → the file's path), by Python's zipfile. */
function zip(target: string, entries: Record<string, string>): void {
  const script = [
    'import json, sys, zipfile',
    'target, entries = sys.argv[1], json.load(sys.stdin)',
    'with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:',
    '    for name in sorted(entries):',
    '        info = zipfile.ZipInfo(name, date_time=(2000, 1, 1, 0, 0, 0))',
    '        info.compress_type = zipfile.ZIP_DEFLATED',
    '        info.external_attr = 0o644 << 16',
    '        archive.writestr(info, open(entries[name], "rb").read())',
  ].join('\n');
  execFileSync(PYTHON, ['-c', script, target], { input: JSON.stringify(entries) });
}

/** Files of a package folder, by their path inside it. */
function filesOf(dir: string, names: string[]): Record<string, string> {
  return Object.fromEntries(names.map((name) => [name, join(ROOT, dir, name)]));
}

/** The commit's time (RFC 3339): the Go module version's `Time`. */
function commitTime(): string {
  try {
    return execFileSync('git', ['log', '-1', '--format=%cI'], {
      cwd: ROOT,
      encoding: 'utf8',
    }).trim();
  } catch {
    return new Date().toISOString();
  }
}

/** Builds every artifact of `version` into `out` (emptied first); the files made. */
export function buildRelease(version: string, out: string): string[] {
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const made: string[] = [];

  // Every package is built from a copy: nothing is written in the tree (a test may be packing
  // the SDK from it meanwhile), and each gets the LICENSE.
  const work = mkdtempSync(join(tmpdir(), 'tourops-release-'));
  try {
    // The TypeScript SDK: compiled as sdk:build does it, then npm's own tarball.
    const sdk = join(work, 'sdk');
    mkdirSync(sdk);
    for (const name of ['package.json', 'README.md'])
      cpSync(join(ROOT, 'sdk', name), join(sdk, name));
    cpSync(join(ROOT, 'LICENSE'), join(sdk, 'LICENSE'));
    const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
    execFileSync(
      process.execPath,
      [tsc, '-p', 'sdk/tsconfig.json', '--outDir', join(sdk, 'dist')],
      {
        cwd: ROOT,
        stdio: 'inherit',
      },
    );
    cpSync(join(ROOT, 'sdk/src/api.d.ts'), join(sdk, 'dist/api.d.ts'));
    execFileSync('npm', ['pack', sdk, '--ignore-scripts', '--pack-destination', out, '--silent'], {
      cwd: work,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    made.push(`tourops-sdk-${version}.tgz`);

    // Python: the wheel by pip, the sdist by setuptools' own PEP 517 hook.
    const python = join(work, 'python');
    cpSync(join(ROOT, 'sdk/python'), python, {
      recursive: true,
      filter: (path) => !/(__pycache__|\.egg-info|\/build)$/.test(path),
    });
    cpSync(join(ROOT, 'LICENSE'), join(python, 'LICENSE'));
    const pip = ['-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation', '--no-index'];
    execFileSync(PYTHON, [...pip, '--wheel-dir', out, '.'], { cwd: python, stdio: 'ignore' });
    const sdist = execFileSync(
      PYTHON,
      [
        '-c',
        'import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))',
        out,
      ],
      { cwd: python, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] },
    )
      .trim()
      .split('\n')
      .at(-1) as string;
    // setuptools before 69 names it tourops-webhooks-<v>; PEP 625 names it with the underscore.
    const sdistName = `tourops_webhooks-${version}.tar.gz`;
    if (sdist !== sdistName) renameSync(join(out, sdist), join(out, sdistName));
    made.push(`tourops_webhooks-${version}-py3-none-any.whl`, sdistName);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }

  // Go: the module as a module proxy serves it (GOPROXY=file://<out>/goproxy).
  const tag = `v${version}`;
  const goFiles = { ...filesOf('sdk/go', ['go.mod', 'verify.go', 'verify_test.go', 'README.md']) };
  const versions = join(out, 'goproxy', GO_MODULE, '@v');
  mkdirSync(versions, { recursive: true });
  writeFileSync(join(versions, 'list'), `${tag}\n`);
  writeFileSync(
    join(versions, `${tag}.info`),
    JSON.stringify({ Version: tag, Time: commitTime() }),
  );
  cpSync(join(ROOT, 'sdk/go/go.mod'), join(versions, `${tag}.mod`));
  zip(
    join(versions, `${tag}.zip`),
    Object.fromEntries(
      Object.entries({ ...goFiles, LICENSE: join(ROOT, 'LICENSE') }).map(([name, path]) => [
        `${GO_MODULE}@${tag}/${name}`,
        path,
      ]),
    ),
  );
  made.push(
    ...['list', `${tag}.info`, `${tag}.mod`, `${tag}.zip`].map((name) =>
      relative(out, join(versions, name)),
    ),
  );

  // PHP: a Composer artifact (composer.json at the root of the zip), without its tests.
  const phpSources = readdirSync(join(ROOT, 'sdk/php/src')).filter((name) => name.endsWith('.php'));
  zip(join(out, `tourops-webhooks-${version}.zip`), {
    ...filesOf('sdk/php', [
      'composer.json',
      'autoload.php',
      'README.md',
      ...phpSources.map((name) => `src/${name}`),
    ]),
    LICENSE: join(ROOT, 'LICENSE'),
  });
  made.push(`tourops-webhooks-${version}.zip`);
  return made;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { values } = parseArgs({
    options: { out: { type: 'string' }, version: { type: 'string' } },
  });
  if (values.version) {
    setVersion(values.version);
    console.log(
      `Version ${values.version} in every manifest; commit it, then tag v${values.version}.`,
    );
  } else {
    const version = releaseVersion();
    const out = values.out ?? join(ROOT, 'dist');
    for (const file of buildRelease(version, out)) console.log(join(out, file));
  }
}
