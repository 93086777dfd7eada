import type { Insertable, Selectable, Updateable } from 'kysely';
import type { ApiTokensTable, MembersTable, TenantsTable } from '../db/schema.ts';
import { Repository } from './repository.ts';

export type TenantRow = Selectable<TenantsTable>;
export type MemberRow = Selectable<MembersTable>;
export type TokenRow = Selectable<ApiTokensTable>;

/** Tenants are the root of scoping, so these lookups are by their own id (admin and CLI only). */
export class TenantsRepository extends Repository {
  findById(id: string): Promise<TenantRow | undefined> {
    return this.db.selectFrom('tenants').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** Operators type either; ids (`ten_…`) and slugs cannot collide. */
  findByIdOrSlug(idOrSlug: string): Promise<TenantRow | undefined> {
    return this.db
      .selectFrom('tenants')
      .selectAll()
      .where((eb) => eb.or([eb('id', '=', idOrSlug), eb('slug', '=', idOrSlug)]))
      .executeTakeFirst();
  }

  findBySlug(slug: string): Promise<TenantRow | undefined> {
    return this.db.selectFrom('tenants').selectAll().where('slug', '=', slug).executeTakeFirst();
  }

  /**
   * The tenant row, locked (see lockedRows): quota checks of one tenant take turns, beside the
   * idempotency claims and trips inserted under it.
   */
  lockForQuota(id: string) {
    return this.lockedRows(
      this.db.selectFrom('tenants').selectAll().where('id', '=', id),
    ).executeTakeFirst();
  }

  async insert(row: Insertable<TenantsTable>): Promise<TenantRow> {
    return this.db.insertInto('tenants').values(row).returningAll().executeTakeFirstOrThrow();
  }

  update(id: string, patch: Updateable<TenantsTable>) {
    return this.db
      .updateTable('tenants')
      .set(patch)
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst();
  }

  /** Every tenant, oldest first (ids are time-ordered). */
  list(): Promise<TenantRow[]> {
    return this.db.selectFrom('tenants').selectAll().orderBy('id').execute();
  }

  count(): Promise<number> {
    return this.db
      .selectFrom('tenants')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow()
      .then((row) => Number(row.n));
  }
}

export class MembersRepository extends Repository {
  insert(row: Insertable<MembersTable>): Promise<MemberRow> {
    return this.db.insertInto('members').values(row).returningAll().executeTakeFirstOrThrow();
  }

  findById(tenantId: string, id: string) {
    return this.db
      .selectFrom('members')
      .selectAll()
      .where('tenantId', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  /** Who is told when a webhook endpoint is paused. */
  ownersAndAdmins(tenantId: string) {
    return this.db
      .selectFrom('members')
      .select(['id', 'email'])
      .where('tenantId', '=', tenantId)
      .where('role', 'in', ['owner', 'admin'])
      .orderBy('id')
      .execute();
  }

  findByEmail(tenantId: string, email: string) {
    return this.db
      .selectFrom('members')
      .selectAll()
      .where('tenantId', '=', tenantId)
      .where('email', '=', email)
      .executeTakeFirst();
  }
}

export interface TokenWithTenant {
  token: TokenRow;
  tenant: TenantRow;
}

export class TokensRepository extends Repository {
  insert(row: Insertable<ApiTokensTable>): Promise<TokenRow> {
    return this.db.insertInto('apiTokens').values(row).returningAll().executeTakeFirstOrThrow();
  }

  /** The authentication lookup: by hash (unique index), joined to its tenant in one round trip. */
  async findByHash(tokenHash: string): Promise<TokenWithTenant | undefined> {
    const row = await this.db
      .selectFrom('apiTokens as k')
      .innerJoin('tenants as t', 't.id', 'k.tenantId')
      .select([
        'k.id',
        'k.tenantId',
        'k.name',
        'k.tokenHash',
        'k.prefix',
        'k.env',
        'k.scopes',
        'k.createdBy',
        'k.expiresAt',
        'k.revokedAt',
        'k.lastUsedAt',
        'k.createdAt',
        't.name as tenantName',
        't.slug as tenantSlug',
        't.tier as tenantTier',
        't.active as tenantActive',
        't.tripQuota as tenantTripQuota',
        't.webhookEndpointCap as tenantWebhookEndpointCap',
        't.createdAt as tenantCreatedAt',
        't.updatedAt as tenantUpdatedAt',
      ])
      .where('k.tokenHash', '=', tokenHash)
      .executeTakeFirst();
    if (!row) return undefined;
    const {
      tenantName,
      tenantSlug,
      tenantTier,
      tenantActive,
      tenantTripQuota,
      tenantWebhookEndpointCap,
      tenantCreatedAt,
      tenantUpdatedAt,
      ...token
    } = row;
    return {
      token,
      tenant: {
        id: token.tenantId,
        name: tenantName,
        slug: tenantSlug,
        tier: tenantTier,
        active: tenantActive,
        tripQuota: tenantTripQuota,
        webhookEndpointCap: tenantWebhookEndpointCap,
        createdAt: tenantCreatedAt,
        updatedAt: tenantUpdatedAt,
      },
    };
  }

  /** A tenant's tokens, oldest first, revoked ones included. */
  listForTenant(tenantId: string): Promise<TokenRow[]> {
    return this.db
      .selectFrom('apiTokens')
      .selectAll()
      .where('tenantId', '=', tenantId)
      .orderBy('id')
      .execute();
  }

  findById(id: string): Promise<TokenRow | undefined> {
    return this.db.selectFrom('apiTokens').selectAll().where('id', '=', id).executeTakeFirst();
  }

  revoke(id: string, at: string) {
    return this.db
      .updateTable('apiTokens')
      .set((eb) => ({ revokedAt: eb.fn.coalesce('revokedAt', eb.val(at)) }))
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst();
  }

  /** Conditional, so several processes together still write at most about once per interval. */
  touchLastUsed(id: string, at: string, notAfter: string): Promise<unknown> {
    return this.db
      .updateTable('apiTokens')
      .set({ lastUsedAt: at })
      .where('id', '=', id)
      .where((eb) => eb.or([eb('lastUsedAt', 'is', null), eb('lastUsedAt', '<=', notAfter)]))
      .execute();
  }
}
