import { BoundedMap } from '../lib/bounded-map.ts';

type RowBuilder = (values: unknown[]) => Record<string, unknown>;

/**
 * Columns stored as 0/1 integers (one representation on both backends) that the code sees as
 * booleans: converted here, where rows are built, and back in `storedParameters`. Names as in SQL
 * (`tenant_active` is the token lookup's alias of `tenants.active`).
 */
const BOOLEAN_COLUMNS = new Set([
  'active',
  'backed_off',
  'is_deposit',
  'is_test',
  'propagate_trace_context',
  'read_only',
  'standard_webhooks',
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
