import type { Database } from '../db/database.ts';
import { CLIENT_KINDS, isOneOf } from '../domain/states.ts';
import { type Clock, changedAt, nowIso } from '../lib/clock.ts';
import { keysetPage, type Page, type PageRequest } from '../lib/cursor.ts';
import { newId } from '../lib/ids.ts';
import { parseStoredJson } from '../lib/json.ts';
import { notFound } from '../lib/problems.ts';
import type { ClientRow, ClientsRepository } from '../repositories/clients-repository.ts';
import type { EventsService } from './events-service.ts';
import { owningTenant } from './owner.ts';

export interface ClientListQuery extends PageRequest {
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

interface ClientsServiceDeps {
  database: Database;
  clients: ClientsRepository;
  events: EventsService;
  clock: Clock;
}

export class ClientsService {
  constructor(private readonly deps: ClientsServiceDeps) {}

  /** The tenant that owns this client (the admin API addresses it by id alone). */
  tenantOf(id: string): Promise<string> {
    return owningTenant(this.deps.clients, id, 'Client');
  }

  async list(tenantId: string, query: ClientListQuery): Promise<Page<Client>> {
    const kind = isOneOf(CLIENT_KINDS, query.kind) ? query.kind : undefined;
    const page = await keysetPage('clients', query, (afterId, limit) =>
      this.deps.clients.list(tenantId, { afterId, limit, kind, archived: query.archived }),
    );
    return { data: page.data.map(toClient), meta: page.meta };
  }

  async get(tenantId: string, id: string): Promise<Client> {
    const row = await this.deps.clients.findById(tenantId, id);
    if (!row) throw notFound('Client');
    return toClient(row);
  }

  /** Creates the client and its `client.created` event in one transaction. */
  async create(tenantId: string, input: CreateClientInput): Promise<Client> {
    return this.deps.database.withTransaction(async () => {
      const now = nowIso(this.deps.clock);
      const row = await this.deps.clients.insert({
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
      });
      const client = toClient(row);
      await this.emitChange(client, 'client.created', null);
      return client;
    });
  }

  /** Archives or unarchives the client, with its `client.updated` event, in one transaction. */
  async setArchived(tenantId: string, id: string, archived: boolean): Promise<Client> {
    return this.deps.database.withTransaction(async () => {
      const current = await this.deps.clients.lockById(tenantId, id);
      if (!current) throw notFound('Client');
      if ((current.archivedAt !== null) === archived) return toClient(current);
      const now = changedAt(this.deps.clock, current.updatedAt);
      const row = await this.deps.clients.update(tenantId, id, {
        archivedAt: archived ? now : null,
        updatedAt: now,
      });
      if (!row) throw notFound('Client');
      const client = toClient(row);
      await this.emitChange(client, 'client.updated', toClient(current));
      return client;
    });
  }

  /** A client's creation or change, with the client as it is now and what moved from `before`. */
  private async emitChange(
    client: Client,
    type: 'client.created' | 'client.updated',
    before: Client | null,
  ): Promise<void> {
    const members = { clientId: client.id, kind: client.kind, displayName: client.displayName };
    await this.deps.events.emitChange(client.tenantId, type, members, { before, after: client });
  }
}
