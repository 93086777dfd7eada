// The docs' generated sections (src/http/reference/doc-sections.ts): checked by `npm run lint`,
// written by `npm run docs:sections`.
//
//   tsx scripts/doc-sections.ts [--write]   (DOCS_DIR: another folder of pages, for the test)
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { withGeneratedSections } from '../src/http/reference/doc-sections.ts';

const docs = process.env.DOCS_DIR ?? fileURLToPath(new URL('../docs', import.meta.url));
const write = process.argv.includes('--write');
const stale: string[] = [];
for (const name of readdirSync(docs).filter((file) => file.endsWith('.md'))) {
  const path = join(docs, name);
  const text = readFileSync(path, 'utf8');
  const rendered = withGeneratedSections(text);
  if (rendered === text) continue;
  if (write) writeFileSync(path, rendered);
  else stale.push(`docs/${name}`);
}
if (stale.length > 0) {
  console.error(`generated sections out of date in ${stale.join(', ')}: run npm run docs:sections`);
  process.exit(1);
}
