// A second reporter for `npm test`: after the run, each failed test again, with its file and
// error, so that the end of a long log (all a CI summary may keep) says what failed, not only
// how many. A suite that failed only because a test in it failed is not repeated.
import { relative } from 'node:path';
import { inspect } from 'node:util';

export default async function* failuresReporter(source) {
  const failures = [];
  // Per file, the names of the suites around the test that starts (test:start comes in the
  // order tests are defined), so that a failure names its suite: "(postgres)" or "(sqlite)".
  const suites = new Map();
  for await (const event of source) {
    if (event.type === 'test:start') {
      const { name, file, nesting } = event.data;
      const path = suites.get(file) ?? [];
      path.length = nesting;
      path.push(name);
      suites.set(file, path);
    }
    if (event.type !== 'test:fail') continue;
    const { name, file, nesting, details } = event.data;
    if (details.error?.failureType === 'subtestsFailed') continue;
    const path = [...(suites.get(file) ?? []).slice(0, nesting), name].join(' > ');
    failures.push({ name: path, file, error: details.error });
  }
  if (failures.length === 0) return;
  yield `\n# ${failures.length} failed:\n`;
  for (const { name, file, error } of failures) {
    const where = file ? sourceName(relative(process.cwd(), file)) : 'unknown file';
    const cause = error?.cause ?? error;
    const text = inspect(cause, { depth: 4 }).split('\n').slice(0, 30).join('\n');
    yield `\n# ${name} (${where})\n${text.replace(/^/gm, '#   ')}\n`;
  }
}

/** A bundle's path (scripts/test.mjs names them by their source) back to its source file's. */
function sourceName(path) {
  const bundled = /^node_modules\/\.cache\/tourops-tests\/\d+\/[^/]+\/(.*)\.js$/.exec(path);
  return bundled ? `${bundled[1]}.ts` : path;
}
