import { type Clock, nowIso } from '../lib/clock.ts';
import { decodeCursor, type Page, toPage } from '../lib/cursor.ts';
import { type IdPrefix, newId } from '../lib/ids.ts';
import { parseStoredJson } from '../lib/json.ts';
import { fieldError } from '../lib/problems.ts';
import {
  CITY_SCOPED_KINDS,
  type LibraryKind,
  type LibraryRepository,
  type LibraryRow,
} from '../repositories/library-repository.ts';

export interface LibraryListQuery {
  limit: number;
  cursor?: string;
  cityId?: string;
  q?: string;
}

const ID_PREFIX: Record<LibraryKind, IdPrefix> = {
  cities: 'cty',
  hotels: 'htl',
  activities: 'act',
  vehicles: 'veh',
  guides: 'gde',
};

/** Guides keep languages as JSON text; everything else is stored as shown. */
function toItem(kind: LibraryKind, row: LibraryRow): LibraryRow {
  return kind === 'guides' ? { ...row, languages: parseStoredJson(row.languages as string) } : row;
}

export class LibraryService {
  constructor(
    private readonly library: LibraryRepository,
    private readonly clock: Clock,
  ) {}

  async list(
    kind: LibraryKind,
    tenantId: string,
    query: LibraryListQuery,
  ): Promise<Page<LibraryRow>> {
    const afterId = decodeCursor(`library.${kind}`, query.cursor);
    const rows = await this.library.list(kind, tenantId, {
      afterId,
      limit: query.limit,
      cityId: CITY_SCOPED_KINDS.includes(kind) ? query.cityId : undefined,
      q: query.q,
    });
    const page = toPage(`library.${kind}`, rows, query.limit);
    return { data: page.data.map((row) => toItem(kind, row)), meta: page.meta };
  }

  /** `fields` has passed the kind's request schema; only references need the database. */
  async create(
    kind: LibraryKind,
    tenantId: string,
    fields: Record<string, unknown>,
  ): Promise<LibraryRow> {
    const cityId = fields.cityId;
    if (typeof cityId === 'string' && !(await this.library.exists('cities', tenantId, cityId))) {
      throw fieldError('cityId', "is not a city of this tenant's library");
    }
    const now = nowIso(this.clock);
    const row: LibraryRow = {
      id: newId(ID_PREFIX[kind]),
      tenantId,
      ...fields,
      createdAt: now,
      updatedAt: now,
    };
    if (kind === 'guides') row.languages = JSON.stringify(fields.languages ?? []);
    return toItem(kind, await this.library.insert(kind, row));
  }
}
