import { type Selectable, sql } from 'kysely';
import { prepare } from '../db/prepared.ts';
import type { IdempotencyKeysTable } from '../db/schema.ts';
import { Repository } from './repository.ts';

export type IdempotencyRow = Selectable<IdempotencyKeysTable>;

/**
 * `locked`: this transaction holds the key. `taken`: a committed answer holds it. `busy`: another
 * live transaction holds it (PostgreSQL only; on SQLite the write lock serializes them).
 */
export type LockOutcome = 'locked' | 'taken' | 'busy';

/** A key as a request locks it: what its row records besides the answer. */
export interface IdempotencyEntry {
  tenantId: string;
  key: string;
  fingerprint: string;
  createdAt: string;
  expiresAt: string;
}

/** The answer stored under a key. */
export interface StoredAnswer {
  status: number;
  type: string | null;
  body: string;
}

export class IdempotencyRepository extends Repository {
  private readonly byKey = prepare(this.db, (tenantId: string, key: string) =>
    this.db
      .selectFrom('idempotencyKeys')
      .selectAll()
      .where('tenantId', '=', tenantId)
      .where('key', '=', key),
  );

  /**
   * Locks the key inside the caller's transaction, so that the key's row commits with the
   * request's side effects and its stored answer, or not at all: a process killed mid-request
   * leaves the key locked by nobody, usable again at once. A committed row is always a finished
   * answer; one still `in_progress` was left by an earlier version and, like an expired one, is
   * replaced.
   *
   * On PostgreSQL the lock is an advisory lock and a row inserted now (see lockRow). On SQLite the
   * transaction holds the database's one write lock from its first statement (BEGIN IMMEDIATE), so
   * no other writer, in this process or another, can take the key before it commits: a look-up
   * locks it, and
   * `complete` writes the row once, with its answer.
   */
  async lock(entry: IdempotencyEntry): Promise<LockOutcome> {
    if (this.dialect === 'postgres') {
      const first = await this.lockRow(entry);
      if (first !== 'taken') return first;
      if (!(await this.deleteStale(entry))) return 'taken';
      return this.lockRow(entry);
    }
    const [row] = await this.byKey(entry.tenantId, entry.key);
    if (row === undefined) return 'locked';
    if (!isStale(row as IdempotencyRow, entry.createdAt)) return 'taken';
    await this.deleteStale(entry);
    return 'locked';
  }

  /** Records the answer of a locked key, in the transaction that locked it. */
  async complete(entry: IdempotencyEntry, answer: StoredAnswer): Promise<void> {
    const { tenantId, key, fingerprint, createdAt, expiresAt } = entry;
    if (this.dialect === 'postgres') {
      await this.completeLockedRow(answer.status, answer.type, answer.body, tenantId, key);
    } else {
      await this.insertAnswer(
        tenantId,
        key,
        fingerprint,
        createdAt,
        expiresAt,
        answer.status,
        answer.type,
        answer.body,
      );
    }
  }

  /**
   * A transaction-scoped advisory lock on the key, taken without waiting, decides between live
   * duplicates (an insert would wait, unbounded, on the other's uncommitted row); the server drops
   * it with the connection of a crashed process. One round trip for both.
   */
  private async lockRow(entry: IdempotencyEntry): Promise<LockOutcome> {
    const { tenantId, key, fingerprint, createdAt, expiresAt } = entry;
    const [row] = await this.lockStatement(tenantId, key, fingerprint, createdAt, expiresAt);
    return !row.held ? 'busy' : row.inserted > 0 ? 'locked' : 'taken';
  }

  private readonly lockStatement = prepare(
    this.db,
    (tenantId: string, key: string, fingerprint: string, createdAt: string, expiresAt: string) =>
      sql<{ held: boolean; inserted: number }>`
        with lock as (
          select pg_try_advisory_xact_lock(hashtextextended(${tenantId}::text || ' ' || ${key}::text, 0)) as held
        ), inserted as (
          insert into idempotency_keys (tenant_id, key, fingerprint, status, created_at, expires_at)
          select ${tenantId}::text, ${key}::text, ${fingerprint}::text, 'in_progress', ${createdAt}::text, ${expiresAt}::text
          from lock where held
          on conflict (tenant_id, key) do nothing
          returning 1
        )
        select (select held from lock) as held, (select count(*) from inserted)::int as inserted
      `,
  );

  private readonly completeLockedRow = prepare(
    this.db,
    (status: number, type: string | null, body: string, tenantId: string, key: string) =>
      this.db
        .updateTable('idempotencyKeys')
        .set({ status: 'done', responseStatus: status, responseType: type, responseBody: body })
        .where('tenantId', '=', tenantId)
        .where('key', '=', key),
  );

  private readonly insertAnswer = prepare(
    this.db,
    (
      tenantId: string,
      key: string,
      fingerprint: string,
      createdAt: string,
      expiresAt: string,
      status: number,
      type: string | null,
      body: string,
    ) =>
      this.db.insertInto('idempotencyKeys').values({
        tenantId,
        key,
        fingerprint,
        status: 'done',
        responseStatus: status,
        responseType: type,
        responseBody: body,
        createdAt,
        expiresAt,
      }),
  );

  private async deleteStale({ tenantId, key, createdAt: now }: IdempotencyEntry) {
    const stale = await this.db
      .deleteFrom('idempotencyKeys')
      .where('tenantId', '=', tenantId)
      .where('key', '=', key)
      .where((eb) => eb.or([eb('expiresAt', '<=', now), eb('status', '=', 'in_progress')]))
      .executeTakeFirst();
    return Number(stale.numDeletedRows) > 0;
  }

  async find(tenantId: string, key: string): Promise<IdempotencyRow | undefined> {
    const [row] = await this.byKey(tenantId, key);
    return row as IdempotencyRow | undefined;
  }

  /**
   * One statement of a purge: deletes up to `limit` keys that expired by `now`, walking the
   * expiry index from `from` (inclusive: keys expiring at the same instant may span two
   * statements), and returns their expiry times, in order. Keys another transaction holds are
   * passed over.
   */
  async deleteExpired(from: string, now: string, limit: number): Promise<string[]> {
    const result = await sql<{ expiresAt: string }>`
      delete from idempotency_keys where (tenant_id, key) in (
        select k.tenant_id, k.key from idempotency_keys k
        where k.expires_at >= ${from} and k.expires_at <= ${now}
        order by k.expires_at limit ${limit} ${this.skipLocked('k')}
      )
      returning expires_at`.execute(this.db);
    return result.rows.map((row) => row.expiresAt).sort();
  }
}

/** Expired, or left `in_progress` by an earlier version: the key is free to lock again. */
function isStale(row: IdempotencyRow, now: string): boolean {
  return row.expiresAt <= now || row.status === 'in_progress';
}
