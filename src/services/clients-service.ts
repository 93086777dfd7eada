import type { Database } from '../db/database.ts';
import { CLIENT_KINDS, isOneOf } from '../domain/states.ts';
import { type Clock, nowIso } from '../lib/clock.ts';
import { decodeCursor, type Page, toPage } from '../lib/cursor.ts';
import { newId } from '../lib/ids.ts';
import { parseStoredJson } from '../lib/json.ts';
import { notFound } from '../lib/problems.ts';
import type { ClientRow, ClientsRepository } from '../repositories/clients-repository.ts';
import type { EventsService } from './events-service.ts';

export interface ClientListQuery {
  limit: number;
  cursor?: string;
  kind?: string;
  archived?: boolean;
}

export interface CreateClientInput {
  kind: (typeof CLIENT_KINDS)[number];
  displayName: string;
  legalName?: string;
  email?: string;
  phone?: string;
  countryIso?: string;
  language?: string;
  currency?: string;
  vatId?: string;
  notes?: string;
  tags?: string[];
}

/** A client as the API shows it: tags as an array. */
export type Client = Omit<ClientRow, 'tags'> & { tags: string[] };

function toClient(row: ClientRow): Client {
  return { ...row, tags: parseStoredJson<string[]>(row.tags) };
}

export class ClientsService {
  constructor(
    private readonly database: Database,
    private readonly clients: ClientsRepository,
    private readonly events: EventsService,
    private readonly clock: Clock,
  ) {}

  async list(tenantId: string, query: ClientListQuery): Promise<Page<Client>> {
    const afterId = decodeCursor('clients', query.cursor);
    const kind = isOneOf(CLIENT_KINDS, query.kind) ? query.kind : undefined;
    const rows = await this.clients.list(tenantId, {
      afterId,
      limit: query.limit,
      kind,
      archived: query.archived,
    });
    const page = toPage('clients', rows, query.limit);
    return { data: page.data.map(toClient), meta: page.meta };
  }

  async get(tenantId: string, id: string): Promise<Client> {
    const row = await this.clients.findById(tenantId, id);
    if (!row) throw notFound('Client');
    return toClient(row);
  }

  /** Creates the client and its `client.created` event in one transaction. */
  async create(tenantId: string, input: CreateClientInput): Promise<Client> {
    return this.database.db.transaction().execute(async (trx) => {
      const now = nowIso(this.clock);
      const row = await this.clients.insert(
        {
          id: newId('cli'),
          tenantId,
          kind: input.kind,
          displayName: input.displayName,
          legalName: input.legalName ?? null,
          email: input.email ?? null,
          phone: input.phone ?? null,
          // Normalized so filters and invoices see one spelling.
          countryIso: input.countryIso?.toUpperCase() ?? null,
          language: input.language ?? null,
          currency: input.currency?.toUpperCase() ?? null,
          vatId: input.vatId ?? null,
          tags: JSON.stringify(input.tags ?? []),
          notes: input.notes ?? null,
          archivedAt: null,
          createdAt: now,
          updatedAt: now,
        },
        trx,
      );
      await this.events.emit(trx, tenantId, 'client.created', {
        clientId: row.id,
        kind: row.kind,
        displayName: row.displayName,
      });
      return toClient(row);
    });
  }

  async setArchived(tenantId: string, id: string, archived: boolean): Promise<Client> {
    const current = await this.clients.findById(tenantId, id);
    if (!current) throw notFound('Client');
    if ((current.archivedAt !== null) === archived) return toClient(current);
    const now = nowIso(this.clock);
    const row = await this.clients.update(tenantId, id, {
      archivedAt: archived ? now : null,
      updatedAt: now,
    });
    if (!row) throw notFound('Client');
    return toClient(row);
  }
}
