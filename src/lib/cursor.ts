import { fieldError } from './problems.ts';

/**
 * Keyset cursors: the position is the last id of the page (ids are unique and time-ordered), so
 * page 10,000 costs one index seek like page 1 and concurrent inserts never shift a page. The
 * list name is bound in so a cursor from one endpoint cannot be replayed on another.
 */
export function encodeCursor(list: string, lastId: string): string {
  return Buffer.from(`${list}:${lastId}`, 'utf8').toString('base64url');
}

function decodeCursor(list: string, cursor: string | undefined): string | null {
  if (cursor === undefined) return null;
  const text = /^[A-Za-z0-9_-]{1,200}$/.test(cursor)
    ? Buffer.from(cursor, 'base64url').toString('utf8')
    : '';
  const separator = text.indexOf(':');
  const id = text.slice(separator + 1);
  if (separator < 0 || text.slice(0, separator) !== list || !/^[a-z]{3}_[0-9A-Z]{26}$/.test(id)) {
    throw fieldError('cursor', 'is not a cursor issued by this list endpoint');
  }
  return id;
}

export interface Page<T> {
  data: T[];
  meta: { cursor: string | null; hasMore: boolean };
}

/** Builds a page from `limit + 1` rows fetched in order; the extra row only signals `hasMore`. */
function toPage<T extends { id: string }>(list: string, rows: T[], limit: number): Page<T> {
  const hasMore = rows.length > limit;
  const data = hasMore ? rows.slice(0, limit) : rows;
  return {
    data,
    meta: { cursor: hasMore ? encodeCursor(list, data[data.length - 1].id) : null, hasMore },
  };
}

/** What a list endpoint is asked for; `limit` defaults to DEFAULT_PAGE_SIZE. */
export interface PageRequest {
  limit?: number;
  cursor?: string;
}

const DEFAULT_PAGE_SIZE = 50;

/**
 * One keyset page of the list `list`: decodes the cursor (422 when it is not one of this list's),
 * fetches `limit + 1` rows from the position it names (null: the start) and builds the page.
 */
export async function keysetPage<T extends { id: string }>(
  list: string,
  request: PageRequest,
  fetch: (position: string | null, limit: number) => Promise<T[]>,
): Promise<Page<T>> {
  const limit = request.limit ?? DEFAULT_PAGE_SIZE;
  const position = decodeCursor(list, request.cursor);
  return toPage(list, await fetch(position, limit), limit);
}
