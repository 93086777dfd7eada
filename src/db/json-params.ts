import { type RawBuilder, sql } from 'kysely';
import type { Dialect } from './database.ts';

// A list or a batch of rows as one JSON parameter: a statement's text then never depends on how
// many there are, so it is compiled once (see prepare) and PostgreSQL plans it once a connection.

/** The members of a JSON array parameter, as a bare select (see jsonMembers, jsonKeyIn). */
function members(dialect: Dialect, list: string): RawBuilder<unknown> {
  return dialect === 'postgres'
    ? sql`select jsonb_array_elements_text(cast(${list} as jsonb))`
    : sql`select value from json_each(${list})`;
}

/** The members of a JSON array parameter, as a subquery (`IN` it). */
export function jsonMembers(dialect: Dialect, list: string): RawBuilder<unknown> {
  return sql`(${members(dialect, list)})`;
}

/**
 * Whether `column`, a key the table is indexed by, is one of the rows `select` returns (a bare
 * select). On PostgreSQL `= any(array(…))`: the select runs once and the index is probed for each
 * row, where with `IN` the planner may walk the whole table, history included (it did for the
 * claimed rows' read, while the table was small enough to look cheaper that way).
 */
export function keyIn(dialect: Dialect, column: string, select: RawBuilder<unknown>) {
  return dialect === 'postgres'
    ? sql<boolean>`${sql.ref(column)} = any(array(${select}))`
    : sql<boolean>`${sql.ref(column)} in (${select})`;
}

/** Whether `column`, an indexed key, is one of a JSON array parameter's members (see keyIn). */
export function jsonKeyIn(dialect: Dialect, column: string, list: string): RawBuilder<boolean> {
  return keyIn(dialect, column, members(dialect, list));
}

/**
 * A column of jsonRows: its name, whether it is an integer (else text, as is), and the member of
 * the objects it is taken from (see jsonRowsOf).
 */
export type JsonColumn = readonly [name: string, type: 'text' | 'integer', member: string];

/** `objects` as jsonRows' parameter: an array of arrays, each member of `columns` in order. */
export function jsonRowsOf(objects: readonly object[], columns: readonly JsonColumn[]): string {
  return JSON.stringify(
    objects.map((o) =>
      columns.map(([, , member]) => {
        const value = (o as Record<string, unknown>)[member];
        // Booleans as the backends store them (see storedParameters).
        return typeof value === 'boolean' ? Number(value) : (value ?? null);
      }),
    ),
  );
}

/**
 * The rows of a JSON parameter holding an array of arrays (see jsonRowsOf), as a subquery whose
 * columns are `columns`, the n-th taken from each array's n-th member (a JSON null is SQL null).
 */
export function jsonRows(
  dialect: Dialect,
  rows: string,
  columns: readonly JsonColumn[],
): RawBuilder<unknown> {
  const source =
    dialect === 'postgres'
      ? sql`jsonb_array_elements(cast(${rows} as jsonb)) as r (value)`
      : sql`json_each(${rows}) as r`;
  const selected = columns.map(([name, type], i) =>
    type === 'integer'
      ? sql`cast(r.value ->> ${sql.lit(i)} as integer) as ${sql.ref(name)}`
      : sql`r.value ->> ${sql.lit(i)} as ${sql.ref(name)}`,
  );
  return sql`(select ${sql.join(selected)} from ${source})`;
}
