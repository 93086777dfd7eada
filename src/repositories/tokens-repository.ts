import type { Insertable, Selectable } from 'kysely';
import type { ApiTokensTable } from '../db/schema.ts';
import { Repository } from './repository.ts';
import type { TenantRow } from './tenants-repository.ts';

export type TokenRow = Selectable<ApiTokensTable>;

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
