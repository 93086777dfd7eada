import { sql } from 'kysely';
import type { LibraryKind } from '../domain/library.ts';
import { Repository } from './repository.ts';

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
export class LibraryRepository extends Repository {
  list(tenantId: string, kind: LibraryKind, filter: LibraryListFilter): Promise<LibraryRow[]> {
    // One concrete table type keeps Kysely's builder typed; every kind has the columns used here.
    let query = this.db
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

  insert(kind: LibraryKind, row: LibraryRow): Promise<LibraryRow> {
    return this.db
      .insertInto(kind as 'hotels')
      .values(row as never)
      .returningAll()
      .executeTakeFirstOrThrow() as Promise<LibraryRow>;
  }

  async exists(tenantId: string, kind: LibraryKind, id: string): Promise<boolean> {
    const row = await this.db
      .selectFrom(kind as 'hotels')
      .select('id')
      .where('tenantId', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
    return row !== undefined;
  }
}
