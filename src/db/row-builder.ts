import { BoundedMap } from '../lib/bounded-map.ts';
import type { DB } from './schema.ts';

type RowBuilder = (values: unknown[]) => Record<string, unknown>;

/** Every column the schema types as a boolean, by its camelCase name. */
type BooleanColumn = {
  [T in keyof DB]: { [C in keyof DB[T]]-?: DB[T][C] extends boolean ? C : never }[keyof DB[T]];
}[keyof DB];

/**
 * The list, checked to hold every boolean column of the schema: while one is missing the call
 * fails to compile, naming it (`missing`).
 */
function everyBoolean<const L extends readonly BooleanColumn[]>(
  list: L &
    ([Exclude<BooleanColumn, L[number]>] extends [never]
      ? unknown
      : { missing: Exclude<BooleanColumn, L[number]> }),
): L {
  return list;
}

/**
 * Columns stored as 0/1 integers (one representation on both backends) that the code sees as
 * booleans: converted here, where rows are built, and back in `storedParameters`.
 */
const STORED_BOOLEANS = everyBoolean([
  'active',
  'asymmetricSignatures',
  'backedOff',
  'cancelled',
  'isDeposit',
  'isTest',
  'propagateTraceContext',
  'readOnly',
  'standardWebhooks',
]);

/** Their names as in SQL (`tenant_active`: the token lookup's alias of `tenants.active`). */
const BOOLEAN_COLUMNS = new Set([
  ...STORED_BOOLEANS.map((name) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)),
  'tenant_active',
]);

/** Query parameters as the backends store them: booleans as 0/1 (neither driver binds them so). */
export function storedParameters(parameters: readonly unknown[]): unknown[] {
  let out: unknown[] | null = null;
  for (let i = 0; i < parameters.length; i++) {
    const value = parameters[i];
    if (typeof value === 'boolean') {
      out ??= parameters.slice();
      out[i] = value ? 1 : 0;
    }
  }
  return out ?? (parameters as unknown[]);
}

/**
 * Builds camelCase row objects from arrays of column values. Both drivers create an object one
 * property at a time and the camelCase plugin then copied it again; one generated object literal
 * per column list does both jobs at once, and turns the 0/1 columns into booleans on the way.
 */
export class RowBuilders {
  private readonly cache = new BoundedMap<string, RowBuilder>(500);

  constructor(private readonly toCamelCase: (name: string) => string) {}

  for(columns: readonly string[]): RowBuilder {
    const key = columns.join('\u0000');
    const build = this.cache.get(key);
    if (build) return build;
    // Column names come from our own SQL; JSON.stringify makes each a safe property key.
    const fields = columns.map((name, i) => {
      const value = BOOLEAN_COLUMNS.has(name) ? `v[${i}] === 1` : `v[${i}]`;
      return `${JSON.stringify(this.toCamelCase(name))}: ${value}`;
    });
    return this.cache.remember(
      key,
      new Function('v', `return { ${fields.join(', ')} };`) as RowBuilder,
    );
  }
}
