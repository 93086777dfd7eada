import { type Insertable, type Selectable, sql, type Updateable } from 'kysely';
import type { ErasuresTable } from '../db/schema.ts';
import { ERASED_BOOKING, ERASED_CLIENT } from '../domain/erasure.ts';
import { firstIdAt } from '../lib/ids.ts';
import { Repository } from './repository.ts';

export type ErasureRow = Selectable<ErasuresTable>;

/** The event types whose data an erasure may touch (about a client or a booking). */
const PERSONAL_TYPE_PATTERNS = ['client.%', 'booking.%', 'dispute.%'];

/**
 * The erasure records, and the statements an erasure runs over the stores that hold personal
 * data (clients, bookings, events, attempt logs, saved answers): each takes the tenant.
 */
export class ErasuresRepository extends Repository {
  insert(row: Insertable<ErasuresTable>): Promise<unknown> {
    return this.db.insertInto('erasures').values(row).execute();
  }

  find(tenantId: string, id: string): Promise<ErasureRow | undefined> {
    return this.db
      .selectFrom('erasures')
      .selectAll()
      .where('tenantId', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  /** The clients and bookings of the tenant with this e-mail address, case-insensitive. */
  async idsWithEmail(
    tenantId: string,
    email: string,
  ): Promise<{ clientIds: string[]; bookingIds: string[] }> {
    const address = email.toLowerCase();
    const clients = await this.db
      .selectFrom('clients')
      .select('id')
      .where('tenantId', '=', tenantId)
      .where(sql<string>`lower(email)`, '=', address)
      .orderBy('id')
      .execute();
    const bookings = await this.db
      .selectFrom('bookings')
      .select('id')
      .where('tenantId', '=', tenantId)
      .where(sql<string>`lower(traveler_email)`, '=', address)
      .orderBy('id')
      .execute();
    return { clientIds: clients.map((r) => r.id), bookingIds: bookings.map((r) => r.id) };
  }

  async exists(tenantId: string, table: 'clients' | 'bookings', id: string): Promise<boolean> {
    const row = await this.db
      .selectFrom(table as 'clients')
      .select('id')
      .where('tenantId', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
    return row !== undefined;
  }

  /**
   * Takes the oldest unfinished erasure whose lease has run out (none held, or its runner gone):
   * leased to `token` until `leaseUntil`. Undefined when there is none.
   */
  async lease(now: string, leaseUntil: string, token: string): Promise<ErasureRow | undefined> {
    const candidate = await this.db
      .selectFrom('erasures')
      .select(['id', 'leaseToken'])
      .where('status', '!=', 'done')
      .where((eb) => eb.or([eb('leaseUntil', 'is', null), eb('leaseUntil', '<', now)]))
      .orderBy('requestedAt')
      .limit(1)
      .executeTakeFirst();
    if (candidate === undefined) return undefined;
    // Fenced on the token read, and the lease still out: of two runners that read the same one,
    // one wins, and a runner that renewed its lease meanwhile keeps it.
    const taken = await this.db
      .updateTable('erasures')
      .set({ leaseUntil, leaseToken: token })
      .where('id', '=', candidate.id)
      .where((eb) =>
        candidate.leaseToken === null
          ? eb('leaseToken', 'is', null)
          : eb('leaseToken', '=', candidate.leaseToken),
      )
      .where((eb) => eb.or([eb('leaseUntil', 'is', null), eb('leaseUntil', '<', now)]))
      .returningAll()
      .executeTakeFirst();
    return taken;
  }

  /**
   * Saves an erasure's progress if `token` still holds its lease (locking the row until the
   * transaction ends); false when another runner has taken it.
   */
  async advance(id: string, token: string, patch: Updateable<ErasuresTable>): Promise<boolean> {
    const result = await this.db
      .updateTable('erasures')
      .set(patch)
      .where('id', '=', id)
      .where('leaseToken', '=', token)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /** The tenant's events about a client or a booking in (afterSeq, untilSeq], oldest first. */
  personalEventsAfter(tenantId: string, afterSeq: number, untilSeq: number | null, limit: number) {
    let query = this.db
      .selectFrom('events')
      .select(['seq', 'id', 'type', 'data'])
      .where('tenantId', '=', tenantId)
      .where('seq', '>', afterSeq);
    if (untilSeq !== null) query = query.where('seq', '<=', untilSeq);
    return query
      .where((eb) => eb.or(PERSONAL_TYPE_PATTERNS.map((p) => eb('type', 'like', p))))
      .orderBy('seq')
      .limit(limit)
      .execute();
  }

  /** New bodies for these events, in one statement. */
  async setEventData(tenantId: string, all: ReadonlyArray<{ id: string; data: string }>) {
    for (const rows of chunks(all)) {
      await this.db
        .updateTable('events')
        .set({
          data: byKey(
            'id',
            'data',
            rows.map((row) => [row.id, row.data]),
          ),
        })
        // Not `tenant_id = ?`: SQLite without statistics would walk the tenant's index for it.
        .where(sql`${sql.ref('tenantId')} || ''`, '=', tenantId)
        .where(
          'id',
          'in',
          rows.map((row) => row.id),
        )
        .execute();
    }
  }

  /** The attempt logs of every delivery of these events (redeliveries included). */
  attemptsOfEvents(tenantId: string, eventIds: readonly string[]) {
    if (eventIds.length === 0) return Promise.resolve([]);
    return this.db
      .selectFrom('webhookAttempts as a')
      .innerJoin('webhookDeliveries as d', 'd.id', 'a.deliveryId')
      .select(['a.id', 'a.responseBody'])
      .where('a.tenantId', '=', tenantId)
      .where('d.eventId', 'in', eventIds)
      .execute();
  }

  /**
   * The tenant's attempt logs recorded since `since` (what ran while an erasure did): ids are
   * minted when an attempt is recorded, time first, so the range is the primary key's.
   */
  attemptsSince(tenantId: string, since: string) {
    return this.db
      .selectFrom('webhookAttempts')
      .select(['id', 'responseBody'])
      .where('id', '>=', firstIdAt('att', Date.parse(since)))
      .where('tenantId', '=', tenantId)
      .execute();
  }

  /** New answers for these attempt logs, in one statement. */
  async setAttemptBodies(tenantId: string, all: ReadonlyArray<{ id: string; body: string }>) {
    for (const rows of chunks(all)) {
      await this.db
        .updateTable('webhookAttempts')
        .set({
          responseBody: byKey(
            'id',
            'response_body',
            rows.map((row) => [row.id, row.body]),
          ),
        })
        .where('tenantId', '=', tenantId)
        .where(
          'id',
          'in',
          rows.map((row) => row.id),
        )
        .execute();
    }
  }

  /** The tenant's saved answers after `afterKey`, by key. */
  answersAfter(tenantId: string, afterKey: string, limit: number) {
    return this.db
      .selectFrom('idempotencyKeys')
      .select(['key', 'responseBody'])
      .where('tenantId', '=', tenantId)
      .where('key', '>', afterKey)
      .where('responseBody', 'is not', null)
      .orderBy('key')
      .limit(limit)
      .execute();
  }

  /** The tenant's saved answers made since `since`. */
  answersSince(tenantId: string, since: string) {
    return this.db
      .selectFrom('idempotencyKeys')
      .select(['key', 'responseBody'])
      .where('tenantId', '=', tenantId)
      .where('createdAt', '>=', since)
      .where('responseBody', 'is not', null)
      .execute();
  }

  /** New bodies for these saved answers, in one statement. */
  async setAnswers(tenantId: string, all: ReadonlyArray<{ key: string; body: string }>) {
    for (const rows of chunks(all)) {
      await this.db
        .updateTable('idempotencyKeys')
        .set({
          responseBody: byKey(
            'key',
            'response_body',
            rows.map((row) => [row.key, row.body]),
          ),
        })
        .where('tenantId', '=', tenantId)
        .where(
          'key',
          'in',
          rows.map((row) => row.key),
        )
        .execute();
    }
  }

  /** The personal members of these clients as they stand, locked until the transaction ends. */
  lockClients(tenantId: string, ids: readonly string[]) {
    if (ids.length === 0) return Promise.resolve([]);
    return this.lockedRows(
      this.db
        .selectFrom('clients')
        .select(['id', 'email', 'phone', 'legalName', 'vatId', 'notes', 'displayName', 'tags'])
        .where('tenantId', '=', tenantId)
        .where('id', 'in', ids),
    ).execute();
  }

  /** The travellers of these bookings as they stand, locked until the transaction ends. */
  lockBookings(tenantId: string, ids: readonly string[]) {
    if (ids.length === 0) return Promise.resolve([]);
    return this.lockedRows(
      this.db
        .selectFrom('bookings')
        .select(['id', 'travelerName', 'travelerEmail'])
        .where('tenantId', '=', tenantId)
        .where('id', 'in', ids),
    ).execute();
  }

  async eraseClients(tenantId: string, ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    await this.db
      .updateTable('clients')
      .set({ ...ERASED_CLIENT, tags: JSON.stringify(ERASED_CLIENT.tags) })
      .where('tenantId', '=', tenantId)
      .where('id', 'in', ids)
      .execute();
  }

  async eraseBookings(tenantId: string, ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    await this.db
      .updateTable('bookings')
      .set(ERASED_BOOKING)
      .where('tenantId', '=', tenantId)
      .where('id', 'in', ids)
      .execute();
  }
}

/** Rows a statement writes at most (bind parameters stay far under both backends' limits). */
const CHUNK = 500;

function* chunks<T>(rows: readonly T[]): Generator<readonly T[]> {
  for (let i = 0; i < rows.length; i += CHUNK) yield rows.slice(i, i + CHUNK);
}

/**
 * A column's new value for each row named by its key (`case key when … then … else column end`):
 * one statement for a batch, where one per row took a round trip each on PostgreSQL.
 */
function byKey(key: string, column: string, values: ReadonlyArray<readonly [string, string]>) {
  const arms = values.map(([k, value]) => sql`when ${k} then ${value}`);
  return sql<string>`case ${sql.ref(key)} ${sql.join(arms, sql` `)} else ${sql.ref(column)} end`;
}
