import type { Compilable, CompiledQuery, Kysely, RawBuilder } from 'kysely';
import type { DB } from './schema.ts';

const SLOT = '\u0000slot:';

export type Param = string | number | null;

/** SQL text of every query compiled by `prepare`, with its server-side statement name. */
const statementNames = new Map<string, string>();

/**
 * The name PostgreSQL knows a `prepare`d query by: pg parses and plans a named statement once per
 * connection, then only binds and executes it. Other statements stay unnamed, since their text
 * can vary without bound (IN-lists) and each name would hold server memory per connection.
 */
export function statementName(sql: string): string | undefined {
  return statementNames.get(sql);
}

/**
 * A query compiled once and then run with new parameter values. Kysely otherwise rebuilds and
 * recompiles the operation tree on every call, the largest share of a hot read in a profile.
 * `build` receives placeholders for its parameters; each must be used, as a value only.
 * It runs on `db`, so inside a unit of work it joins the transaction like any other statement.
 */
export function prepare<P extends Param[], R>(
  db: Kysely<DB>,
  build: (...params: P) => Compilable<R> | RawBuilder<R>,
): (...params: P) => Promise<R[]> {
  let compiled: CompiledQuery<R> | undefined;
  let slots: number[] = [];
  return async (...params) => {
    if (!compiled) {
      const built = build(...(params.map((_, i) => `${SLOT}${i}`) as P));
      // A query builder compiles itself; raw SQL compiles against the database it runs on.
      compiled = (built as RawBuilder<R>).compile(db);
      slots = compiled.parameters.map((value) =>
        typeof value === 'string' && value.startsWith(SLOT) ? Number(value.slice(SLOT.length)) : -1,
      );
      if (new Set(slots.filter((slot) => slot >= 0)).size !== params.length) {
        throw new Error(`prepared query must use every parameter: ${compiled.sql}`);
      }
      if (!statementNames.has(compiled.sql)) {
        statementNames.set(compiled.sql, `tourops_${statementNames.size + 1}`);
      }
    }
    const template = compiled;
    const parameters = template.parameters.map((value, i) =>
      slots[i] >= 0 ? params[slots[i]] : value,
    );
    const result = await db.executeQuery<R>({ ...template, parameters });
    return result.rows;
  };
}
