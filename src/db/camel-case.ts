import { CamelCasePlugin } from 'kysely';

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
