import type { Insertable } from 'kysely';
import type { PortalSessionsTable } from '../db/schema.ts';
import { Repository } from './repository.ts';

/** A live portal session with what decides whether it still stands. */
export interface PortalSessionRow {
  id: string;
  tenantId: string;
  readOnly: boolean;
  tokenId: string | null;
  expiresAt: string;
  tenantActive: boolean;
  /** Of the token that asked for the link (null for the operator's links). */
  tokenRevokedAt: string | null;
  tokenExpiresAt: string | null;
}

export class PortalSessionsRepository extends Repository {
  async insert(row: Insertable<PortalSessionsTable>): Promise<void> {
    await this.db.insertInto('portalSessions').values(row).execute();
  }

  /**
   * Uses a link: sets its session if the link is unused and unexpired, in one statement, so two
   * clicks racing on one link cannot both win. The session's tenant, or undefined.
   */
  async exchange(
    linkHash: string,
    now: string,
    session: { sessionHash: string; expiresAt: string },
  ): Promise<{ id: string; tenantId: string } | undefined> {
    return this.db
      .updateTable('portalSessions')
      .set(session)
      .where('linkHash', '=', linkHash)
      .where('sessionHash', 'is', null)
      .where('linkExpiresAt', '>', now)
      .returning(['id', 'tenantId'])
      .executeTakeFirst();
  }

  /** Whether this link is still unused and within its time, without using it. */
  async linkUsable(linkHash: string, now: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('portalSessions')
      .select('id')
      .where('linkHash', '=', linkHash)
      .where('sessionHash', 'is', null)
      .where('linkExpiresAt', '>', now)
      .executeTakeFirst();
    return row !== undefined;
  }

  /** The unexpired session of this cookie, joined to its tenant and token in one round trip. */
  async findLive(sessionHash: string, now: string): Promise<PortalSessionRow | undefined> {
    return this.db
      .selectFrom('portalSessions as s')
      .innerJoin('tenants as t', 't.id', 's.tenantId')
      .leftJoin('apiTokens as k', 'k.id', 's.tokenId')
      .select([
        's.id',
        's.tenantId',
        's.readOnly',
        's.tokenId',
        's.expiresAt',
        't.active as tenantActive',
        'k.revokedAt as tokenRevokedAt',
        'k.expiresAt as tokenExpiresAt',
      ])
      .where('s.sessionHash', '=', sessionHash)
      .where('s.expiresAt', '>', now)
      .executeTakeFirst() as Promise<PortalSessionRow | undefined>;
  }

  /** Ends a session (sign out). */
  async remove(tenantId: string, id: string): Promise<void> {
    await this.db
      .deleteFrom('portalSessions')
      .where('tenantId', '=', tenantId)
      .where('id', '=', id)
      .execute();
  }

  /** Drops links and sessions that can no longer be used; returns how many. */
  async purgeExpired(now: string): Promise<number> {
    const result = await this.db
      .deleteFrom('portalSessions')
      .where('linkExpiresAt', '<=', now)
      .where((eb) => eb.or([eb('expiresAt', 'is', null), eb('expiresAt', '<=', now)]))
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
