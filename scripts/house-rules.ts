// The written rules of the codebase that no other linter knows, checked by `npm run lint`
// (docs/development.md, "Lint"). Each rule has a fixture in test/fixtures/house-rules/
// that test/house-rules.test.ts proves it fails on.
//
//   tsx scripts/house-rules.ts [root]   (root: the checkout, by default this one)
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DELIVERY_STATUSES } from '../src/domain/states.ts';

/** Longest file, in lines, by folder: the most specific prefix wins. */
export const LINE_LIMITS: ReadonlyArray<{ prefix: string; lines: number }> = [
  { prefix: 'src/delivery/', lines: 400 },
  { prefix: 'src/', lines: 600 },
];

/**
 * A delivery's statuses are spelled only beside the moves table (src/domain/webhook-moves.ts,
 * with the list in states.ts); the engine and the repositories name them through it, in code and
 * in SQL alike, so that a status renamed or added is renamed everywhere by the compiler.
 */
const STATUS_RULE_FOLDERS = ['src/delivery/', 'src/repositories/'];

function* sourceFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* sourceFiles(path);
    else if (entry.name.endsWith('.ts')) yield path;
  }
}

/** Comments removed, strings and templates kept (a status in SQL is a string inside a template). */
function withoutComments(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\/|(?<![:'"`\\])\/\/[^\n]*/g, (comment) =>
    comment.replace(/[^\n]/g, ' '),
  );
}

export function checkHouseRules(root: string): string[] {
  const faults: string[] = [];
  const statusLiteral = new RegExp(`(['"])(${DELIVERY_STATUSES.join('|')})\\1`, 'g');
  for (const path of sourceFiles(join(root, 'src'))) {
    const name = relative(root, path).split(sep).join('/');
    const text = readFileSync(path, 'utf8');
    const lines = text.endsWith('\n') ? text.split('\n').length - 1 : text.split('\n').length;
    const limit = LINE_LIMITS.find((l) => name.startsWith(l.prefix));
    if (limit && lines > limit.lines) {
      faults.push(
        `${name}: ${lines} lines, over the ${limit.lines} a file in ${limit.prefix} may have`,
      );
    }
    if (!STATUS_RULE_FOLDERS.some((folder) => name.startsWith(folder))) continue;
    if (name.endsWith('.test.ts')) continue;
    const code = withoutComments(text).split('\n');
    for (const [i, line] of code.entries()) {
      for (const match of line.matchAll(statusLiteral)) {
        faults.push(
          `${name}:${i + 1}: the delivery status ${match[0]} spelled out; name it through ` +
            'DELIVERY_STATUS (src/domain/webhook-moves.ts)',
        );
      }
    }
  }
  return faults;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const root = process.argv[2] ?? fileURLToPath(new URL('..', import.meta.url));
  const faults = checkHouseRules(root);
  for (const fault of faults) console.error(fault);
  if (faults.length > 0) {
    console.error(`house rules: ${faults.length} broken (docs/development.md, "Lint")`);
    process.exit(1);
  }
  console.log('house rules: file sizes and delivery status names hold');
}
