type RowBuilder = (values: unknown[]) => Record<string, unknown>;

/**
 * Builds camelCase row objects from arrays of column values. Both drivers create an object one
 * property at a time (about 5 µs a row for our tables) and the camelCase plugin then copied it
 * again; one generated object literal per column list does both jobs several times faster.
 */
export class RowBuilders {
  private readonly cache = new Map<string, RowBuilder>();

  constructor(private readonly toCamelCase: (name: string) => string) {}

  for(columns: readonly string[]): RowBuilder {
    const key = columns.join('\u0000');
    let build = this.cache.get(key);
    if (!build) {
      // Column names come from our own SQL; JSON.stringify makes each a safe property key.
      const fields = columns.map((name, i) => `${JSON.stringify(this.toCamelCase(name))}: v[${i}]`);
      build = new Function('v', `return { ${fields.join(', ')} };`) as RowBuilder;
      if (this.cache.size >= 500) this.cache.clear();
      this.cache.set(key, build);
    }
    return build;
  }
}
