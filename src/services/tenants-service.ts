import type { Updateable } from 'kysely';
import { AUTH_CHANGES_CHANNEL, type Notifier } from '../db/notifier.ts';
import type { TenantsTable } from '../db/schema.ts';
import { effectiveTripQuota, effectiveWebhookEndpointCap, type Tier } from '../domain/plans.ts';
import type { MEMBER_ROLES } from '../domain/states.ts';
import {
  TENANT_NAME_MAX_LENGTH,
  TENANT_SLUG_PATTERN,
  TENANT_SLUG_RULE,
} from '../domain/tenants.ts';
import { type Clock, nowIso } from '../lib/clock.ts';
import { newId } from '../lib/ids.ts';
import { conflict, notFound } from '../lib/problems.ts';
import type { MemberRow, MembersRepository } from '../repositories/members-repository.ts';
import type { NotificationsRepository } from '../repositories/notifications-repository.ts';
import type { TenantRow, TenantsRepository } from '../repositories/tenants-repository.ts';
import type { AuthCache } from './auth-cache.ts';
import { FieldErrorCollector } from './validation.ts';

/** A tenant as the admin API and CLI show it: quotas resolved against the plan. */
export interface Tenant {
  id: string;
  name: string;
  slug: string;
  tier: Tier;
  active: boolean;
  tripQuota: number | null;
  webhookEndpointCap: number;
  createdAt: string;
  updatedAt: string;
}

function toTenant(row: TenantRow): Tenant {
  return {
    ...row,
    active: row.active,
    tripQuota: effectiveTripQuota(row),
    webhookEndpointCap: effectiveWebhookEndpointCap(row),
  };
}

export interface PatchTenantInput {
  name?: string;
  tier?: Tier;
  active?: boolean;
  tripQuota?: number | null;
  webhookEndpointCap?: number | null;
}

interface TenantsServiceDeps {
  tenants: TenantsRepository;
  members: MembersRepository;
  notifications: NotificationsRepository;
  authCache: AuthCache;
  notifier: Notifier;
  clock: Clock;
}

export class TenantsService {
  constructor(private readonly deps: TenantsServiceDeps) {}

  async create(input: { name: string; slug: string; tier: Tier }): Promise<Tenant> {
    const errors = new FieldErrorCollector();
    if (!TENANT_SLUG_PATTERN.test(input.slug)) errors.add('slug', `must be ${TENANT_SLUG_RULE}`);
    if (input.name.trim() === '' || input.name.length > TENANT_NAME_MAX_LENGTH) {
      errors.add('name', `must be 1 to ${TENANT_NAME_MAX_LENGTH} characters`);
    }
    errors.throwIfAny();
    if (await this.deps.tenants.findBySlug(input.slug)) {
      throw conflict(`A tenant with slug ${input.slug} already exists.`, 'slug_taken');
    }
    const now = nowIso(this.deps.clock);
    const row = await this.deps.tenants.insert({
      id: newId('ten'),
      name: input.name,
      slug: input.slug,
      tier: input.tier,
      active: true,
      tripQuota: null,
      webhookEndpointCap: null,
      createdAt: now,
      updatedAt: now,
    });
    return toTenant(row);
  }

  count(): Promise<number> {
    return this.deps.tenants.count();
  }

  async list(): Promise<Tenant[]> {
    return (await this.deps.tenants.list()).map(toTenant);
  }

  async get(id: string): Promise<Tenant> {
    return toTenant(await this.getRow(id));
  }

  /** Accepts an id or a slug (the CLI lets operators type either). */
  async resolve(idOrSlug: string): Promise<Tenant> {
    const row = await this.deps.tenants.findByIdOrSlug(idOrSlug);
    if (!row) throw notFound('Tenant');
    return toTenant(row);
  }

  async update(id: string, input: PatchTenantInput): Promise<Tenant> {
    await this.getRow(id);
    const patch: Updateable<TenantsTable> = { updatedAt: nowIso(this.deps.clock) };
    if (input.name !== undefined) patch.name = input.name;
    if (input.tier !== undefined) patch.tier = input.tier;
    if (input.active !== undefined) patch.active = input.active;
    if (input.tripQuota !== undefined) patch.tripQuota = input.tripQuota;
    if (input.webhookEndpointCap !== undefined) patch.webhookEndpointCap = input.webhookEndpointCap;
    const row = await this.deps.tenants.update(id, patch);
    if (!row) throw notFound('Tenant');
    // Plan, activity and quotas are read through authentication: drop what it remembers.
    this.deps.authCache.forgetTenant(id);
    await this.deps.notifier.publish(AUTH_CHANGES_CHANNEL, JSON.stringify({ tenantId: id }));
    return toTenant(row);
  }

  async addMember(
    tenantId: string,
    input: { email: string; role: (typeof MEMBER_ROLES)[number] },
  ): Promise<MemberRow> {
    await this.getRow(tenantId);
    if (await this.deps.members.findByEmail(tenantId, input.email))
      throw conflict(`${input.email} is already a member.`, 'member_exists');
    return this.deps.members.insert({
      id: newId('mem'),
      tenantId,
      email: input.email,
      role: input.role,
      createdAt: nowIso(this.deps.clock),
    });
  }

  async listNotifications(tenantId: string) {
    await this.getRow(tenantId);
    return this.deps.notifications.list(tenantId);
  }

  private async getRow(id: string): Promise<TenantRow> {
    const row = await this.deps.tenants.findById(id);
    if (!row) throw notFound('Tenant');
    return row;
  }
}
