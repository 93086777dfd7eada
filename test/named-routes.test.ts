import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createTestContext, type TestContext } from './helpers/context.ts';
import { ROOT } from './helpers/processes.ts';

// Every route a message, a description or a document names exists, under the method it names: a
// newcomer who follows `take an id from GET /api/v1/…` must not meet a 404 of the route.

const METHODS = 'GET|POST|PUT|PATCH|DELETE';
/**
 * A route named in text: its method when one comes first, then the path's segments, a `<name>`
 * placeholder being one (HTML around a path, as in `</code>`, is not).
 */
const SEGMENT = '(?:<\\w+>|[\\w{}:$.\\-]+)';
const NAMED = new RegExp(
  `(?:\\b(${METHODS})\\s+(?:\\S*?))?(/(?:api|admin)/v1(?:/${SEGMENT})*|/checkout/${SEGMENT})`,
  'g',
);

/** The files whose text names routes: the sources (not tests) and every document. */
function namingFiles(): string[] {
  const files: string[] = [];
  const walk = (dir: string, keep: (name: string) => boolean) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path, keep);
      else if (keep(entry.name)) files.push(path);
    }
  };
  walk(join(ROOT, 'src'), (name) => name.endsWith('.ts') && !name.endsWith('.test.ts'));
  walk(join(ROOT, 'docs'), (name) => name.endsWith('.md'));
  for (const doc of ['README.md', 'bench/README.md', 'sdk/README.md']) {
    files.push(join(ROOT, doc));
  }
  return files;
}

interface Named {
  method: string | null;
  /** With every placeholder segment (`{id}`, `:id`, `<id>`, `$ID`, `${id}`) as `x`. */
  path: string;
  where: string;
}

function namedRoutes(): Named[] {
  const found = new Map<string, Named>();
  for (const file of namingFiles()) {
    const text = readFileSync(file, 'utf8');
    for (const match of text.matchAll(NAMED)) {
      const path = match[2]
        .replace(/[./-]+$/, '')
        .split('/')
        .map((segment) => (/[{}:<>$]/.test(segment) ? 'x' : segment))
        .join('/');
      // A bare prefix, or a template of any resource (`/api/v1/${path}`), names no one route.
      if (/^\/(?:api|admin)\/v1(?:\/x(?:\/|$)|$)/.test(path)) continue;
      const method = match[1] ?? null;
      const line = text.slice(0, match.index).split('\n').length;
      const key = `${method} ${path}`;
      if (!found.has(key))
        found.set(key, { method, path, where: `${relative(ROOT, file)}:${line}` });
    }
  }
  return [...found.values()];
}

describe('every route named in a message or a document exists', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext('sqlite');
  });
  after(() => ctx.close());

  it('answers each under its method with anything but the route 404 or a 5xx', async () => {
    const named = namedRoutes();
    // The collector itself: it finds the routes it must (a typo here would pass everything).
    const keys = new Set(named.map((n) => `${n.method} ${n.path}`));
    for (const expected of [
      'GET /api/v1/libraries/cities',
      'POST /admin/v1/webhooks/x/enable',
      'POST /admin/v1/bookings/x/transition',
    ]) {
      assert.ok(keys.has(expected), `${expected} not collected`);
    }
    assert.ok(named.length > 25, `only ${named.length} routes named`);
    const missing: string[] = [];
    for (const { method, path, where } of named) {
      const answer = await ctx.app.inject({ method: (method ?? 'GET') as 'GET', url: path });
      // A fault is no answer either: a route that exists must not fail on what the text names.
      if (answer.statusCode >= 500 && answer.statusCode !== 501) {
        missing.push(`${method ?? ''} ${path} (${where}): ${answer.statusCode} ${answer.body}`);
        continue;
      }
      if (answer.statusCode !== 404) continue;
      const detail = String(answer.json().detail);
      // A path named without a method exists if it answers any.
      if (method === null && /is not a method of this path/.test(detail)) continue;
      if (/^The route was not found|is not a method of this path/.test(detail)) {
        missing.push(`${method ?? ''} ${path} (${where}): ${detail}`);
      }
    }
    assert.deepEqual(missing, []);
  });
});
