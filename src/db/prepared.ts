import type { Compilable, CompiledQuery, Kysely } from 'kysely';
import type { DB } from './schema.ts';

const SLOT = '\u0000slot:';

export type Param = string | number;

/**
 * A query compiled once and then run with new parameter values. Kysely otherwise rebuilds and
 * recompiles the operation tree on every call, which measured as the largest share of a hot read.
 * `build` receives placeholders for its parameters; each must be used exactly once, as a value.
 * It runs on `db`, so inside a unit of work it joins the transaction like any other statement.
 */
export function prepare<P extends Param[], R>(
  db: Kysely<DB>,
  build: (...params: P) => Compilable<R>,
): (...params: P) => Promise<R[]> {
  let compiled: CompiledQuery<R> | undefined;
  let slots: number[] = [];
  return async (...params) => {
    if (!compiled) {
      compiled = build(...(params.map((_, i) => `${SLOT}${i}`) as P)).compile();
      slots = compiled.parameters.map((value) =>
        typeof value === 'string' && value.startsWith(SLOT) ? Number(value.slice(SLOT.length)) : -1,
      );
      if (slots.filter((slot) => slot >= 0).length !== params.length) {
        throw new Error(`prepared query must use each parameter once: ${compiled.sql}`);
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
