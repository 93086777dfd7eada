// The sources' compiled form, which `tourops` (bin/tourops.js) and `npm start` (bin/start.js)
// run: esbuild bundles them into node_modules/.cache/tourops/<fingerprint>/ on the first run
// after any source changed. Loading a few dozen compiled chunks takes a fraction of what
// compiling hundreds of modules through tsx's loader takes, and that is paid at every start
// of every process (`serve`, `worker`, each of a cluster's processes, each one-shot command).
// Dependencies stay outside the bundle, where they load and are instrumented for tracing as they
// are, but for a few (BUNDLED_PACKAGES) made of hundreds of small modules, each of which would
// cost a resolution and a load of its own at every start.
import { createHash } from 'node:crypto';
import {
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
} from 'node:fs';
import { isBuiltin } from 'node:module';
import { join, relative, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SOURCES = join(ROOT, 'src');
const CACHE = join(ROOT, 'node_modules', '.cache', 'tourops');
/**
 * The modules entry points import (src/-relative, no extension): bin/tourops.js, bin/start.js,
 * bin/sandbox-thread.js.
 */
const ENTRIES = ['v8-flags', 'tracing-start', 'cli/main', 'main', 'transformations/thread'];
/** Bumped when the build's own options change, so older builds are not reused. */
const BUILD_FORMAT = '2';
/** A build nobody started for this long is removed when another is made. */
const UNUSED_BUILD_MS = 7 * 24 * 3600 * 1000;

let loaded;

/**
 * Imports the source module `name` (src/-relative, without its extension) from the current
 * build, building it when the sources changed; where it cannot be built (a read-only install,
 * no esbuild) the sources run through tsx instead.
 */
export async function importSource(name) {
  loaded ??= compiledDirectory().then((directory) => {
    if (directory) {
      // Errors' stacks name the source files and lines (esbuild's linked source maps).
      process.setSourceMapsEnabled(true);
      return (entry) => pathToFileURL(join(directory, `${entry}.js`));
    }
    return import('tsx/esm/api').then(({ register }) => {
      register();
      return (entry) => pathToFileURL(join(SOURCES, `${entry}.ts`));
    });
  });
  return import((await loaded)(name));
}

/** The directory holding the current build (an `<entry>.js` per entry); null when none can be. */
async function compiledDirectory() {
  try {
    const directory = join(CACHE, fingerprint());
    try {
      // Marks it used (see UNUSED_BUILD_MS); fails when it is not there yet.
      const now = new Date();
      utimesSync(directory, now, now);
      return directory;
    } catch (error) {
      // A read-only install (an image's root filesystem) runs the build made into it.
      if (error.code === 'EROFS' || error.code === 'EACCES' || error.code === 'EPERM') {
        statSync(directory);
        return directory;
      }
      return await build(directory);
    }
  } catch {
    return null;
  }
}

/** Every source file's path, size and modification time, with the build's own inputs. */
function fingerprint() {
  // The build names its sources by absolute path (see sourceUrls): it holds for this root only.
  const hash = createHash('sha256').update(`${BUILD_FORMAT}\n${process.version}\n${ROOT}\n`);
  const files = readdirSync(SOURCES, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath ?? entry.path, entry.name))
    .concat(join(ROOT, 'tsconfig.json'), join(ROOT, 'package-lock.json'))
    .sort();
  for (const file of files) {
    const { size, mtimeMs } = statSync(file, { throwIfNoEntry: false }) ?? {};
    hash.update(`${relative(ROOT, file)}\0${size}\0${mtimeMs}\n`);
  }
  return hash.digest('hex').slice(0, 20);
}

async function build(directory) {
  const { build: esbuild } = await import('esbuild');
  mkdirSync(CACHE, { recursive: true });
  // Built beside, then renamed: a process never sees half a build, and of builds made at once
  // the first rename wins and the others are dropped.
  const building = `${directory}.${process.pid}.tmp`;
  await esbuild({
    entryPoints: ENTRIES.map((entry) => join(SOURCES, `${entry}.ts`)),
    outdir: building,
    outbase: SOURCES,
    ...BUNDLE_OPTIONS,
    logLevel: 'silent',
  });
  try {
    renameSync(building, directory);
  } catch {
    rmSync(building, { recursive: true, force: true });
    statSync(directory);
  }
  removeUnused(directory);
  return directory;
}

/**
 * `import.meta.url` in a source file stays that file's URL: the code finds the repository's
 * files (docs, the portal's assets) and resolves loader hooks relative to where it lives in src/.
 * The same holds in a bundled package (Scalar's reference page reads its renderer beside it).
 */
const sourceUrls = {
  name: 'source-urls',
  setup(builder) {
    builder.onLoad({ filter: /\.[cm]?[jt]s$/ }, (args) => ({
      contents: readFileSync(args.path, 'utf8').replaceAll(
        'import.meta.url',
        JSON.stringify(pathToFileURL(args.path).href),
      ),
      loader: args.path.endsWith('ts') ? 'ts' : 'js',
    }));
  },
};

/**
 * Packages bundled into the build, with whatever they import: none is patched by a tracing
 * instrumentation (those load from node_modules, where the instrumentation finds them), and
 * none is also imported by a package left outside (it would then load twice). Every other package
 * is left outside, loaded from node_modules as it is.
 */
const BUNDLED_PACKAGES = [
  'kysely',
  '@sinclair/typebox',
  '@scalar/fastify-api-reference',
  'undici',
  'prom-client',
  'rate-limiter-flexible',
];
/** The package a bare import names (`@scope/name` or `name`). */
const PACKAGE_NAME = /^((?:@[^/]+\/)?[^/]+)/;

/** Marks esbuild's own resolution of a bare import, asked for by bundledPackages. */
const RESOLVING = Symbol('resolving');

const bundledPackages = {
  name: 'bundled-packages',
  setup(builder) {
    builder.onResolve({ filter: /^[^./]/ }, async (args) => {
      if (args.pluginData === RESOLVING) return undefined;
      if (isBuiltin(args.path)) return { path: args.path, external: true };
      // Inside a bundled package: what it imports is bundled with it.
      if (args.importer.includes(`${sep}node_modules${sep}`)) return undefined;
      if (BUNDLED_PACKAGES.includes(PACKAGE_NAME.exec(args.path)?.[1])) return undefined;
      // A name the tsconfig maps into this repository (the SDK's sources) is bundled.
      const { kind, importer, resolveDir } = args;
      const resolved = await builder.resolve(args.path, {
        kind,
        importer,
        resolveDir,
        pluginData: RESOLVING,
      });
      const aPackage =
        resolved.errors.length > 0 || resolved.path.includes(`${sep}node_modules${sep}`);
      return aPackage ? { path: args.path, external: true } : resolved;
    });
  },
};

/**
 * How sources are bundled, here and for the tests (scripts/test.mjs): ESM chunks for Node 20,
 * dependencies left outside but BUNDLED_PACKAGES, linked source maps, `import.meta.url` kept as
 * the source file's.
 */
export const BUNDLE_OPTIONS = {
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  sourcemap: 'linked',
  plugins: [bundledPackages, sourceUrls],
  // A bundled package written as CommonJS requires Node's built-in modules.
  banner: {
    js: "import { createRequire as __bundleRequire } from 'node:module'; const require = __bundleRequire(import.meta.url);",
  },
};

function removeUnused(current) {
  for (const name of readdirSync(CACHE)) {
    const path = join(CACHE, name);
    if (path === current) continue;
    try {
      if (Date.now() - statSync(path).mtimeMs > UNUSED_BUILD_MS) {
        rmSync(path, { recursive: true, force: true });
      }
    } catch {
      // Removed by another process meanwhile.
    }
  }
}
