import type { Kysely, Selectable } from 'kysely';
import type { DB, IdempotencyKeysTable } from '../db/schema.ts';

export type IdempotencyRow = Selectable<IdempotencyKeysTable>;

export class IdempotencyRepository {
  constructor(private readonly db: Kysely<DB>) {}

  /**
   * Claims the key with one insert that only one request can win (the primary key decides, in
   * either backend and across processes). Only when it is taken is an expired row removed, after
   * which the key is claimed again.
   */
  async claim(
    tenantId: string,
    key: string,
    fingerprint: string,
    now: string,
    expiresAt: string,
  ): Promise<boolean> {
    if (await this.insertClaim(tenantId, key, fingerprint, now, expiresAt)) return true;
    const expired = await this.db
      .deleteFrom('idempotencyKeys')
      .where('tenantId', '=', tenantId)
      .where('key', '=', key)
      .where('expiresAt', '<=', now)
      .executeTakeFirst();
    return (
      Number(expired.numDeletedRows) > 0 &&
      this.insertClaim(tenantId, key, fingerprint, now, expiresAt)
    );
  }

  private async insertClaim(
    tenantId: string,
    key: string,
    fingerprint: string,
    now: string,
    expiresAt: string,
  ): Promise<boolean> {
    const inserted = await this.db
      .insertInto('idempotencyKeys')
      .values({
        tenantId,
        key,
        fingerprint,
        status: 'in_progress',
        responseStatus: null,
        responseType: null,
        responseBody: null,
        createdAt: now,
        expiresAt,
      })
      .onConflict((oc) => oc.columns(['tenantId', 'key']).doNothing())
      .returning('key')
      .executeTakeFirst();
    return inserted !== undefined;
  }

  find(tenantId: string, key: string): Promise<IdempotencyRow | undefined> {
    return this.db
      .selectFrom('idempotencyKeys')
      .selectAll()
      .where('tenantId', '=', tenantId)
      .where('key', '=', key)
      .executeTakeFirst();
  }

  complete(
    tenantId: string,
    key: string,
    response: { status: number; type: string | null; body: string },
  ): Promise<unknown> {
    return this.db
      .updateTable('idempotencyKeys')
      .set({
        status: 'done',
        responseStatus: response.status,
        responseType: response.type,
        responseBody: response.body,
      })
      .where('tenantId', '=', tenantId)
      .where('key', '=', key)
      .execute();
  }

  release(tenantId: string, key: string): Promise<unknown> {
    return this.db
      .deleteFrom('idempotencyKeys')
      .where('tenantId', '=', tenantId)
      .where('key', '=', key)
      .where('status', '=', 'in_progress')
      .execute();
  }

  async purgeExpired(now: string): Promise<number> {
    const result = await this.db
      .deleteFrom('idempotencyKeys')
      .where('expiresAt', '<=', now)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
