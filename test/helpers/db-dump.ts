import { sql } from 'kysely';
import type { TestContext } from './context.ts';

// What an erasure test scans: every text value of every table, and every form a value may take.

type Row = Record<string, unknown>;

/** Every form in which a value could sit in a column or a page. */
export const formsOf = (value: string) => [
  value,
  JSON.stringify(value).slice(1, -1),
  encodeURIComponent(value),
  Buffer.from(value).toString('base64'),
];

/** Every text value of every table, by table and row (the row's JSON as its key's column). */
export async function dump(ctx: TestContext): Promise<Map<string, Map<string, string>>> {
  const { db, dialect } = ctx.runtime.database;
  const tables =
    dialect === 'sqlite'
      ? (
          await sql<{ name: string }>`select name from sqlite_master where type = 'table'`.execute(
            db,
          )
        ).rows.map((r) => r.name)
      : (
          await sql<{
            name: string;
          }>`select table_name as name from information_schema.tables where table_schema = current_schema()`.execute(
            db,
          )
        ).rows.map((r) => r.name);
  const out = new Map<string, Map<string, string>>();
  for (const table of tables) {
    const rows = (await sql<Row>`select * from ${sql.table(table)}`.execute(db)).rows;
    const byKey = new Map<string, string>();
    for (const row of rows) {
      const key = String(row.id ?? row.key ?? row.seq ?? JSON.stringify(row));
      const text = Object.values(row)
        .filter((v) => typeof v === 'string')
        .join('\u0000');
      byKey.set(`${row.tenant_id ?? ''}/${key}`, text);
    }
    out.set(table, byKey);
  }
  return out;
}
