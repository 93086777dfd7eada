import { type Selectable, sql } from 'kysely';
import type { IdempotencyKeysTable } from '../db/schema.ts';
import { Repository } from './repository.ts';

export type IdempotencyRow = Selectable<IdempotencyKeysTable>;

/**
 * `claimed`: this transaction holds the key. `taken`: a committed answer holds it. `busy`: another
 * live transaction holds it (PostgreSQL only; on SQLite the write lock serializes them).
 */
export type ClaimOutcome = 'claimed' | 'taken' | 'busy';

export class IdempotencyRepository extends Repository {
  /**
   * Claims the key inside the caller's transaction, so that the claim commits with the request's
   * side effects and its stored answer, or not at all: a process killed mid-request leaves no
   * claim behind, and the key is usable again at once. A committed row is always a finished
   * answer; one still `in_progress` was left by an earlier version and, like an expired one, is
   * replaced.
   */
  async claim(
    tenantId: string,
    key: string,
    fingerprint: string,
    now: string,
    expiresAt: string,
  ): Promise<ClaimOutcome> {
    const first = await this.insertClaim(tenantId, key, fingerprint, now, expiresAt);
    if (first !== 'taken') return first;
    const stale = await this.db
      .deleteFrom('idempotencyKeys')
      .where('tenantId', '=', tenantId)
      .where('key', '=', key)
      .where((eb) => eb.or([eb('expiresAt', '<=', now), eb('status', '=', 'in_progress')]))
      .executeTakeFirst();
    if (Number(stale.numDeletedRows) === 0) return 'taken';
    return this.insertClaim(tenantId, key, fingerprint, now, expiresAt);
  }

  private async insertClaim(
    tenantId: string,
    key: string,
    fingerprint: string,
    now: string,
    expiresAt: string,
  ): Promise<ClaimOutcome> {
    if (this.dialect === 'postgres') {
      // A transaction-scoped advisory lock on the key, taken without waiting, decides between
      // live duplicates (an insert would wait, unbounded, on the other's uncommitted row); the
      // server drops it with the connection of a crashed process. One round trip for both.
      const { rows } = await sql<{ held: boolean; inserted: number }>`
        with lock as (
          select pg_try_advisory_xact_lock(hashtextextended(${tenantId}::text || ' ' || ${key}::text, 0)) as held
        ), claimed as (
          insert into idempotency_keys (tenant_id, key, fingerprint, status, created_at, expires_at)
          select ${tenantId}::text, ${key}::text, ${fingerprint}::text, 'in_progress', ${now}::text, ${expiresAt}::text
          from lock where held
          on conflict (tenant_id, key) do nothing
          returning 1
        )
        select (select held from lock) as held, (select count(*) from claimed)::int as inserted
      `.execute(this.db);
      const [row] = rows;
      return !row.held ? 'busy' : row.inserted > 0 ? 'claimed' : 'taken';
    }
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
    return inserted === undefined ? 'taken' : 'claimed';
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
