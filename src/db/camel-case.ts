import {
  CamelCasePlugin,
  type PluginTransformResultArgs,
  type QueryResult,
  type UnknownRow,
} from 'kysely';

/**
 * Identifiers become snake_case in SQL as usual, but rows arrive from both drivers already
 * camelCased (see RowBuilders), so results pass through untouched.
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
