import { existsSync, mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/**
 * Creates `path` and its missing parents, each private (0700), one at a time: Node's recursive
 * mkdir loops forever on a path such as /proc/x, where mkdir answers ENOENT under an existing
 * parent. Throws the first error.
 */
export function makePrivateDirectory(path: string): void {
  const missing: string[] = [];
  let current = resolve(path);
  while (!existsSync(current)) {
    missing.unshift(current);
    const parent = dirname(current);
    if (parent === current) break;
    current = parent;
  }
  for (const dir of missing) mkdirSync(dir, { mode: 0o700 });
}
