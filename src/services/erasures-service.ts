import { setTimeout as sleep } from 'node:timers/promises';
import type { Database } from '../db/database.ts';
import {
  ERASED_BOOKING,
  ERASED_CLIENT,
  ERASED_TEXT,
  type ErasureCounts,
  type ErasureStatus,
  type ErasureTarget,
  eraseAnswer,
  eraseEventData,
  needleForms,
  noCounts,
} from '../domain/erasure.ts';
import { redacted } from '../domain/redaction.ts';
import { type Clock, nowIso } from '../lib/clock.ts';
import { newId } from '../lib/ids.ts';
import { parseStoredJson } from '../lib/json.ts';
import { notFound } from '../lib/problems.ts';
import type { ErasureRow, ErasuresRepository } from '../repositories/erasures-repository.ts';
import type { EventsService } from './events-service.ts';

/** What the operator names: exactly one of them (the route's schema holds it to one). */
export interface ErasureSubject {
  clientId?: string;
  bookingId?: string;
  email?: string;
}

/** An erasure as the API shows it. */
export interface Erasure {
  id: string;
  status: ErasureStatus;
  subject: ErasureSubject;
  requestedAt: string;
  completedAt: string | null;
  redacted: ErasureCounts;
}

/** Events, or saved answers, one batch reads: each batch is one short transaction. */
const BATCH = 50;
/**
 * After each batch, a pause of this many times its duration, as retention's purge does: the
 * erasure takes at most a third of the database's (on SQLite, this thread's) time.
 */
const PAUSE_FACTOR = 2;
/** How long a runner holds an erasure without saving progress before another may take it. */
const ERASURE_LEASE_MS = 5_000;
/**
 * How far before an erasure started the finish looks again at attempt logs and saved answers:
 * an attempt begun before it, or a request under way, may be recorded after its batch passed.
 */
const FINISH_LOOKBACK_MS = 600_000;

/**
 * Where the scans got to: the last event `seq` and the last idempotency key read; the events
 * stage reads up to `until` (the tenant's newest event when the pass began; null: no bound) and
 * has made `passes` passes after the first over what came meanwhile.
 */
interface Cursor {
  seq: number;
  key: string;
  until?: number | null;
  passes?: number;
}

/**
 * Passes the events stage makes after its first, each up to the newest event when it begins: a
 * tenant that writes as fast as the erasure reads would otherwise keep it from ever finishing.
 * What comes after the last is read by the finish.
 */
const CATCH_UP_PASSES = 3;

/** Another runner took the erasure over (this one stalled past its lease): stop, undo the batch. */
class LeaseLost extends Error {}

interface ErasuresServiceDeps {
  database: Database;
  erasures: ErasuresRepository;
  events: EventsService;
  clock: Clock;
}

/**
 * A person's erasure: made by the API, run by the worker (ErasureRunner) in bounded batches, each
 * a transaction that saves its progress and counts with its changes, so that a runner killed
 * part-way is resumed by the next from the last batch committed, and the counts are those of a
 * run never interrupted. The live rows are redacted last, with the announcement, in one
 * transaction: until then they still say what to look for in free text.
 */
export class ErasuresService {
  constructor(private readonly deps: ErasuresServiceDeps) {}

  /** Resolves the subject to ids now (404 for an unknown client or booking) and queues the run. */
  async create(tenantId: string, subject: ErasureSubject): Promise<Erasure> {
    const { erasures } = this.deps;
    return this.deps.database.withTransaction(async () => {
      let ids: { clientIds: string[]; bookingIds: string[] };
      if (subject.clientId !== undefined) {
        if (!(await erasures.exists(tenantId, 'clients', subject.clientId))) {
          throw notFound('Client');
        }
        ids = { clientIds: [subject.clientId], bookingIds: [] };
      } else if (subject.bookingId !== undefined) {
        if (!(await erasures.exists(tenantId, 'bookings', subject.bookingId))) {
          throw notFound('Booking');
        }
        ids = { clientIds: [], bookingIds: [subject.bookingId] };
      } else {
        ids = await erasures.idsWithEmail(tenantId, subject.email as string);
      }
      const row: ErasureRow = {
        id: newId('era'),
        tenantId,
        status: 'pending',
        subjectKind:
          subject.clientId !== undefined
            ? 'clientId'
            : subject.bookingId !== undefined
              ? 'bookingId'
              : 'email',
        subjectId: subject.clientId ?? subject.bookingId ?? null,
        subjectEmail: subject.email ?? null,
        clientIds: JSON.stringify(ids.clientIds),
        bookingIds: JSON.stringify(ids.bookingIds),
        stage: 'events',
        cursor: JSON.stringify({
          seq: 0,
          key: '',
          until: await this.deps.events.newestSeq(tenantId),
          passes: 0,
        } satisfies Cursor),
        redacted: JSON.stringify(noCounts()),
        leaseUntil: null,
        leaseToken: null,
        requestedAt: nowIso(this.deps.clock),
        startedAt: null,
        completedAt: null,
      };
      await erasures.insert(row);
      return toErasure(row);
    });
  }

  async get(tenantId: string, id: string): Promise<Erasure> {
    const row = await this.deps.erasures.find(tenantId, id);
    if (row === undefined) throw notFound('Erasure');
    return toErasure(row);
  }

  /**
   * Leases the oldest unfinished erasure to `token` and runs it to the end, batch after batch,
   * unless `signal` aborts (it stops between batches) or another runner takes it over. False
   * when there was none to run.
   */
  async runNext(token: string, signal?: AbortSignal): Promise<boolean> {
    const now = this.deps.clock.now();
    const row = await this.deps.erasures.lease(now.toISOString(), this.leaseEnd(), token);
    if (row === undefined) return false;
    try {
      for (let erasure: ErasureRow | null = row; erasure !== null; ) {
        if (signal?.aborted) return true;
        const started = performance.now();
        erasure = await this.step(erasure, token);
        if (erasure !== null)
          await sleep(Math.max(1, (performance.now() - started) * PAUSE_FACTOR));
      }
    } catch (error) {
      if (!(error instanceof LeaseLost)) throw error;
    }
    return true;
  }

  private leaseEnd(): string {
    return new Date(this.deps.clock.now().getTime() + ERASURE_LEASE_MS).toISOString();
  }

  /** One batch of the erasure's stage, in a transaction; the row as it stands after, or null. */
  private step(row: ErasureRow, token: string): Promise<ErasureRow | null> {
    return this.deps.database.withTransaction(async () => {
      const startedAt = row.startedAt ?? nowIso(this.deps.clock);
      const fenced = { leaseUntil: this.leaseEnd(), status: 'running' as const, startedAt };
      // First, so that the erasure's row is held for the batch: a runner that lost it stops here.
      if (!(await this.deps.erasures.advance(row.id, token, fenced))) throw new LeaseLost();
      const target = targetOf(row);
      const counts = parseStoredJson<ErasureCounts>(row.redacted);
      const cursor = parseStoredJson<Cursor>(row.cursor);
      const next: ErasureRow = { ...row, ...fenced };
      if (row.stage === 'events') {
        const until = cursor.until ?? null;
        const read = await this.eraseEvents(row.tenantId, target, cursor.seq, until, counts);
        if (read !== null) cursor.seq = read;
        else if (until !== null && (cursor.passes ?? 0) < CATCH_UP_PASSES) {
          const newest = await this.deps.events.newestSeq(row.tenantId);
          if (newest > until) {
            cursor.until = newest;
            cursor.passes = (cursor.passes ?? 0) + 1;
          } else next.stage = 'idempotency';
        } else next.stage = 'idempotency';
      } else if (row.stage === 'idempotency') {
        const read = await this.eraseAnswers(row, target, cursor.key, counts);
        if (read === null) next.stage = 'finish';
        else cursor.key = read;
      } else {
        await this.finish(row, target, cursor, startedAt, counts);
        next.status = 'done';
        next.completedAt = nowIso(this.deps.clock);
        next.subjectEmail = null;
        next.leaseToken = null;
        next.leaseUntil = null;
      }
      next.cursor = JSON.stringify(cursor);
      next.redacted = JSON.stringify(counts);
      const { id: _id, tenantId: _tenant, ...patch } = next;
      await this.deps.erasures.advance(row.id, token, patch);
      return next.status === 'done' ? null : next;
    });
  }

  /**
   * A batch of events about a client or booking after `afterSeq` (up to `untilSeq` unless
   * null): those of the target redacted, and the attempt logs of their deliveries cleared of
   * what each removed. The last `seq` read, or null when none was left.
   */
  private async eraseEvents(
    tenantId: string,
    target: ErasureTarget,
    afterSeq: number,
    untilSeq: number | null,
    counts: ErasureCounts,
  ): Promise<number | null> {
    const { erasures } = this.deps;
    // The target's rows first, locked: every change to them (with its event) is made under
    // their lock, so none is in flight while the events are read. On PostgreSQL `seq` is not
    // commit order, and a batch read past an event not yet committed would never see it.
    const live = await this.liveValues(tenantId, target);
    const rows = await erasures.personalEventsAfter(tenantId, afterSeq, untilSeq, BATCH);
    if (rows.length === 0) return null;
    const removed: string[] = [];
    const erased: string[] = [];
    const changed: Array<{ id: string; data: string }> = [];
    for (const row of rows) {
      const data = parseStoredJson<Record<string, unknown>>(row.data);
      const result = eraseEventData(row.type, data, target);
      if (result === null) continue;
      removed.push(...result.removed);
      erased.push(row.id);
      const text = JSON.stringify(result.data);
      if (text !== row.data) changed.push({ id: row.id, data: text });
    }
    await erasures.setEventData(tenantId, changed);
    counts.events += changed.length;
    if (erased.length > 0) {
      const forms = needleForms([...removed, ...live]);
      const attempts = await erasures.attemptsOfEvents(tenantId, erased);
      counts.webhookAttempts += await this.eraseAttempts(tenantId, attempts, forms);
    }
    return Number(rows[rows.length - 1].seq);
  }

  private async eraseAttempts(
    tenantId: string,
    attempts: ReadonlyArray<{ id: string; responseBody: string }>,
    forms: readonly string[],
  ): Promise<number> {
    const changed: Array<{ id: string; body: string }> = [];
    for (const attempt of attempts) {
      const body = redacted(attempt.responseBody, forms);
      if (body !== attempt.responseBody) changed.push({ id: attempt.id, body });
    }
    await this.deps.erasures.setAttemptBodies(tenantId, changed);
    return changed.length;
  }

  /** One batch of saved answers after `afterKey`; the last key read, or null when none was left. */
  private async eraseAnswers(
    row: ErasureRow,
    target: ErasureTarget,
    afterKey: string,
    counts: ErasureCounts,
  ): Promise<string | null> {
    const answers = await this.deps.erasures.answersAfter(row.tenantId, afterKey, BATCH);
    if (answers.length === 0) return null;
    const forms = needleForms(await this.liveValues(row.tenantId, target, row.subjectEmail));
    counts.idempotencyKeys += await this.eraseSavedAnswers(row.tenantId, target, answers, forms);
    return answers[answers.length - 1].key;
  }

  private async eraseSavedAnswers(
    tenantId: string,
    target: ErasureTarget,
    answers: ReadonlyArray<{ key: string; responseBody: string | null }>,
    forms: readonly string[],
  ): Promise<number> {
    const changed: Array<{ key: string; body: string }> = [];
    for (const answer of answers) {
      if (answer.responseBody === null) continue;
      const body = redacted(eraseAnswer(answer.responseBody, target), forms);
      if (body !== answer.responseBody) changed.push({ key: answer.key, body });
    }
    await this.deps.erasures.setAnswers(tenantId, changed);
    return changed.length;
  }

  /**
   * The last transaction: what was written while the batches ran (events after the last read,
   * attempts and saved answers since shortly before the start), then the live rows, locked, and
   * the announcement `personal_data.erased`.
   */
  private async finish(
    row: ErasureRow,
    target: ErasureTarget,
    cursor: Cursor,
    startedAt: string,
    counts: ErasureCounts,
  ): Promise<void> {
    const { erasures } = this.deps;
    const { tenantId } = row;
    const clients = await erasures.lockClients(tenantId, [...target.clientIds]);
    const bookings = await erasures.lockBookings(tenantId, [...target.bookingIds]);
    for (let seq: number | null = cursor.seq; seq !== null; ) {
      cursor.seq = seq;
      seq = await this.eraseEvents(tenantId, target, seq, null, counts);
    }
    const since = new Date(Date.parse(startedAt) - FINISH_LOOKBACK_MS).toISOString();
    // The rows locked above still hold what the batches searched for: read once, here.
    const forms = needleForms(personalValues(clients, bookings, row.subjectEmail));
    const attempts = await erasures.attemptsSince(tenantId, since);
    counts.webhookAttempts += await this.eraseAttempts(tenantId, attempts, forms);
    const answers = await erasures.answersSince(tenantId, since);
    counts.idempotencyKeys += await this.eraseSavedAnswers(tenantId, target, answers, forms);
    counts.clients += clients.filter((client) => !isErased(client, ERASED_CLIENT)).length;
    counts.bookings += bookings.filter((booking) => !isErased(booking, ERASED_BOOKING)).length;
    await erasures.eraseClients(tenantId, [...target.clientIds]);
    await erasures.eraseBookings(tenantId, [...target.bookingIds]);
    await this.deps.events.emit(tenantId, 'personal_data.erased', {
      erasureId: row.id,
      clientIds: [...target.clientIds],
      bookingIds: [...target.bookingIds],
    });
  }

  /** The personal values the live rows hold now (and the e-mail named): what free text may echo. */
  private async liveValues(
    tenantId: string,
    target: ErasureTarget,
    email: string | null = null,
  ): Promise<string[]> {
    const { erasures } = this.deps;
    return personalValues(
      await erasures.lockClients(tenantId, [...target.clientIds]),
      await erasures.lockBookings(tenantId, [...target.bookingIds]),
      email,
    );
  }
}

type ClientMembers = Awaited<ReturnType<ErasuresRepository['lockClients']>>[number];
type BookingMembers = Awaited<ReturnType<ErasuresRepository['lockBookings']>>[number];

/** The personal values of these rows (and the e-mail named), placeholders left out. */
function personalValues(
  clients: readonly ClientMembers[],
  bookings: readonly BookingMembers[],
  email: string | null,
): string[] {
  const values: string[] = email === null ? [] : [email];
  for (const { id: _id, tags, ...members } of clients) {
    values.push(...parseStoredJson<string[]>(tags));
    for (const value of Object.values(members)) if (value !== null) values.push(value);
  }
  for (const { id: _id, ...members } of bookings) {
    for (const value of Object.values(members)) if (value !== null) values.push(value);
  }
  // A client already erased shows its placeholder, which is no one's data.
  return values.filter((value) => value !== ERASED_CLIENT.displayName);
}

/** Whether a row already holds every placeholder (tags as stored: JSON text). */
function isErased(row: Record<string, unknown>, placeholders: Record<string, unknown>): boolean {
  return Object.entries(placeholders).every(([name, placeholder]) =>
    name === 'tags'
      ? JSON.stringify(parseStoredJson(row.tags as string)) === JSON.stringify(placeholder)
      : row[name] === placeholder,
  );
}

function targetOf(row: ErasureRow): ErasureTarget {
  return {
    clientIds: new Set(parseStoredJson<string[]>(row.clientIds)),
    bookingIds: new Set(parseStoredJson<string[]>(row.bookingIds)),
  };
}

function toErasure(row: ErasureRow): Erasure {
  const subject: ErasureSubject =
    row.subjectKind === 'clientId'
      ? { clientId: row.subjectId as string }
      : row.subjectKind === 'bookingId'
        ? { bookingId: row.subjectId as string }
        : // Once done, the record keeps no copy of the address it was asked to erase.
          { email: row.subjectEmail ?? ERASED_TEXT };
  return {
    id: row.id,
    status: row.status,
    subject,
    requestedAt: row.requestedAt,
    completedAt: row.completedAt,
    redacted: parseStoredJson<ErasureCounts>(row.redacted),
  };
}
