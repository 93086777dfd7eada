import { type Kysely, sql } from 'kysely';
import type { Executor } from '../db/database.ts';
import type { DB } from '../db/schema.ts';

export const LIBRARY_KINDS = ['cities', 'hotels', 'activities', 'vehicles', 'guides'] as const;
export type LibraryKind = (typeof LIBRARY_KINDS)[number];

/** Kinds whose items belong to a city and can be filtered by `cityId`. */
export const CITY_SCOPED_KINDS: readonly LibraryKind[] = ['hotels', 'activities'];

export interface LibraryListFilter {
  afterId: string | null;
  limit: number;
  cityId?: string;
  q?: string;
}

export type LibraryRow = Record<string, unknown> & { id: string; tenantId: string };

/** Escapes LIKE wildcards so `q` is matched literally. */
function likeContains(text: string): string {
  return `%${text.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/**
 * The five catalogs share one shape of query (tenant, keyset by id, optional city and name
 * filters); only their columns differ, and the response schemas pick those.
 */
export class LibraryRepository {
  constructor(private readonly db: Kysely<DB>) {}

  list(
    kind: LibraryKind,
    tenantId: string,
    filter: LibraryListFilter,
    trx: Executor = this.db,
  ): Promise<LibraryRow[]> {
    // One concrete table type keeps Kysely's builder typed; every kind has the columns used here.
    let query = trx
      .selectFrom(kind as 'hotels')
      .selectAll()
      .where('tenantId', '=', tenantId);
    if (filter.cityId !== undefined) query = query.where('cityId', '=', filter.cityId);
    if (filter.q !== undefined) {
      // ESCAPE spelled out: SQLite has no default escape character.
      query = query.where(sql<boolean>`lower(name) like ${likeContains(filter.q)} escape '\\'`);
    }
    if (filter.afterId !== null) query = query.where('id', '>', filter.afterId);
    return query
      .orderBy('id')
      .limit(filter.limit + 1)
      .execute() as Promise<LibraryRow[]>;
  }

  insert(kind: LibraryKind, row: LibraryRow, trx: Executor = this.db): Promise<LibraryRow> {
    return trx
      .insertInto(kind as 'hotels')
      .values(row as never)
      .returningAll()
      .executeTakeFirstOrThrow() as Promise<LibraryRow>;
  }

  async exists(
    kind: LibraryKind,
    tenantId: string,
    id: string,
    trx: Executor = this.db,
  ): Promise<boolean> {
    const row = await trx
      .selectFrom(kind as 'hotels')
      .select('id')
      .where('tenantId', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
    return row !== undefined;
  }
}
