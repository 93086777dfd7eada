import {
  CamelCasePlugin,
  type PluginTransformResultArgs,
  type QueryResult,
  type UnknownRow,
} from 'kysely';

/**
 * CamelCasePlugin whose row mapping skips the nested-object checks: every value we store is a
 * scalar (JSON lives in text columns), and rows are mapped on every read of every list page.
 */
export class FlatCamelCasePlugin extends CamelCasePlugin {
  protected override mapRow(row: Record<string, unknown>): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const key in row) out[this.camelCase(key)] = row[key];
    return out;
  }
}

/**
 * For SQLite: identifiers become snake_case in SQL as usual, but rows arrive from the driver
 * already camelCased (see `CamelRowStatement`), so results pass through untouched.
 */
export class SnakeCaseQueriesPlugin extends CamelCasePlugin {
  override async transformResult(
    args: PluginTransformResultArgs,
  ): Promise<QueryResult<UnknownRow>> {
    return args.result;
  }

  /** The plugin's own column-name mapping, for the driver to apply. */
  toCamelCase(name: string): string {
    return this.camelCase(name);
  }
}
