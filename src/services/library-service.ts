import { CITY_SCOPED_KINDS, type LibraryKind, NOT_A_LIBRARY_CITY } from '../domain/library.ts';
import { type Clock, nowIso } from '../lib/clock.ts';
import { keysetPage, type Page, type PageRequest } from '../lib/cursor.ts';
import { type IdPrefix, newId } from '../lib/ids.ts';
import { parseStoredJson } from '../lib/json.ts';
import { fieldError } from '../lib/problems.ts';
import type { LibraryRepository, LibraryRow } from '../repositories/library-repository.ts';

export interface LibraryListQuery extends PageRequest {
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

interface LibraryServiceDeps {
  library: LibraryRepository;
  clock: Clock;
}

export class LibraryService {
  constructor(private readonly deps: LibraryServiceDeps) {}

  async list(
    tenantId: string,
    kind: LibraryKind,
    query: LibraryListQuery,
  ): Promise<Page<LibraryRow>> {
    const cityId = CITY_SCOPED_KINDS.includes(kind) ? query.cityId : undefined;
    const page = await keysetPage(`library.${kind}`, query, (afterId, limit) =>
      this.deps.library.list(tenantId, kind, { afterId, limit, cityId, q: query.q }),
    );
    return { data: page.data.map((row) => toItem(kind, row)), meta: page.meta };
  }

  /** `fields` has passed the kind's request schema; only references need the database. */
  async create(
    tenantId: string,
    kind: LibraryKind,
    fields: Record<string, unknown>,
  ): Promise<LibraryRow> {
    const cityId = fields.cityId;
    if (
      typeof cityId === 'string' &&
      !(await this.deps.library.exists(tenantId, 'cities', cityId))
    ) {
      throw fieldError('cityId', NOT_A_LIBRARY_CITY);
    }
    const now = nowIso(this.deps.clock);
    const row: LibraryRow = {
      id: newId(ID_PREFIX[kind]),
      tenantId,
      ...fields,
      createdAt: now,
      updatedAt: now,
    };
    if (kind === 'guides') row.languages = JSON.stringify(fields.languages ?? []);
    return toItem(kind, await this.deps.library.insert(kind, row));
  }
}
