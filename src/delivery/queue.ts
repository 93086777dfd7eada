import { type Insertable, type Selectable, type SelectQueryBuilder, sql } from 'kysely';
import { jsonKeyIn, jsonMembers, jsonRows, jsonRowsOf, keyIn } from '../db/json-params.ts';
import { prepare } from '../db/prepared.ts';
import type { DB, WebhookAttemptsTable, WebhookSubscriptionsTable } from '../db/schema.ts';
import { WORKER_LOSSES_LIMIT } from '../domain/attempts.ts';
import { EFFECTIVE_CONCURRENCY_LIMIT_SQL } from '../domain/flow-control.ts';
import { DELIVERY_MOVES } from '../domain/webhook-moves.ts';
import { abandoned, type ClaimParameters, claimStatementOf } from './claim-sql.ts';
import { ATTEMPT_COLUMNS, GIVEN_BACK_COLUMNS, OUTCOME_COLUMNS } from './queue-columns.ts';
import { RegistryStatements } from './registry-sql.ts';
import type { ClaimedDelivery, ClaimOptions, DeliveryOutcome } from './types.ts';

export type { ClaimOptions };

/** An outcome that leaves the delivery to be sent again (DELIVERY_MOVES.retry) keeps its queue row. */
const RETRIED = sql.lit(DELIVERY_MOVES.retry.to);

/**
 * The delivery queue's statements: claim, give back, record outcomes and attempts, dead-letter
 * crash loops, and the worker registry's (registry-sql.ts). The queue's figures are read in
 * stats.ts, the pace of capped subscriptions in pace-sql.ts. They span tenants: the queue is
 * one, whoever's rows are in it.
 */
export class DeliveryQueue extends RegistryStatements {
  /** Claims up to `limit` due rows for `options.workerId` (claimStatement): what sending needs. */
  async claim(now: Date, limit: number, options: ClaimOptions): Promise<ClaimedDelivery[]> {
    const at = now.toISOString();
    const nowUs = now.getTime() * 1000;
    const parameters: ClaimParameters = [
      at,
      nowUs,
      // No slot lies before the epoch: a horizon reaching back past it leaves out every one.
      options.paceHorizonUs ?? -nowUs - 1,
      options.workerId,
      options.aliveSince,
      options.staleBefore,
      limit,
      Math.min(limit, options.rowsPerSubscription),
      Math.min(limit, options.newcomerRoom ?? limit),
      JSON.stringify(options.skip ?? []),
      JSON.stringify(options.skipTenants ?? []),
      JSON.stringify(Object.fromEntries(options.tenantRoom ?? [])),
      JSON.stringify(options.settled ?? []),
    ];
    if (this.dialect === 'postgres') return this.claimedAndRead(...parameters);
    const claimed = await this.claimRows(...parameters);
    if (claimed.length === 0) return [];
    return this.claimedRows(at, JSON.stringify(claimed.map((row) => row.deliveryId))) as Promise<
      ClaimedDelivery[]
    >;
  }

  /** SQLite's claim, compiled once; its rows are then read (claimedRows). */
  private readonly claimRows = prepare(this.db, (...p: ClaimParameters) =>
    claimStatementOf(this.dialect, p),
  );

  /** What sending each claimed row needs (`ids`: a JSON array), compiled once (SQLite's). */
  private readonly claimedRows = prepare(this.db, (now: string, ids: string) =>
    this.sendingNeeds(this.db.selectFrom('webhookQueue as q'))
      .where(jsonKeyIn(this.dialect, 'q.delivery_id', ids))
      .where('q.claimedAt', '=', now),
  );

  /**
   * PostgreSQL's claim and the read of what sending its rows needs, one statement: the claim's
   * rows (`claimed`: delivery_id, attempts, claimed_at) joined to the history, event and
   * subscription. A claim and its read are one round trip, and no claim's answer can be lost
   * between them.
   */
  private readonly claimedAndRead = prepare(
    this.db,
    (...params: ClaimParameters) =>
      sql<ClaimedDelivery>`with claimed as (${claimStatementOf(this.dialect, params)})
        ${this.sendingNeeds(
          this.db.selectFrom(
            sql<{ deliveryId: string; attempts: number; claimedAt: string }>`claimed`.as('q'),
          ),
        )}`,
  );

  /** The columns sending a claimed row needs, from the queue rows `q` (see claimedRows). */
  private sendingNeeds<
    Q extends SelectQueryBuilder<
      DB & { q: { deliveryId: string; attempts: number; claimedAt: string | null } },
      'q',
      object
    >,
  >(from: Q) {
    return from
      .innerJoin('webhookDeliveries as d', 'd.id', 'q.deliveryId')
      .innerJoin('events as e', 'e.id', 'd.eventId')
      .innerJoin('webhookSubscriptions as s', 's.id', 'd.subscriptionId')
      .select([
        'd.id',
        'd.tenantId',
        'd.subscriptionId',
        'd.eventId',
        'd.eventType',
        'q.attempts',
        'q.claimedAt',
        'e.data',
        'e.isTest',
        'd.sequence',
        's.url',
        's.urlPassword',
        's.receiverSecrets',
        's.standardWebhooks',
        sql<number>`${sql.raw(EFFECTIVE_CONCURRENCY_LIMIT_SQL)}`.as('concurrencyLimit'),
        's.maxPerSecond',
        's.ordering',
        's.signingKey',
        's.retiredSigningKeys',
        's.asymmetricSignatures',
        's.signingKeyPair',
        'e.traceContext',
        's.propagateTraceContext',
        's.payload',
        's.transformation',
        's.retrySchedule',
        's.receiverAuth',
      ]);
  }

  /**
   * A worker's batch of settlements, in the caller's transaction: claims given back, outcomes,
   * the attempt log; then the subscriptions whose counters or holds it changes, locked (see
   * lockSubscriptions) and returned.
   */
  async record(batch: {
    givenBack: ReadonlyArray<{ id: string; claimedAt: string; nextAttemptAt: string }>;
    outcomes: readonly DeliveryOutcome[];
    attempts: Insertable<WebhookAttemptsTable>[];
    subscriptionIds: string[];
  }): Promise<Selectable<WebhookSubscriptionsTable>[]> {
    await this.giveBack(batch.givenBack);
    await this.recordOutcomes(batch.outcomes);
    await this.insertAttempts(batch.attempts);
    if (batch.subscriptionIds.length === 0) return [];
    return this.lockSubscriptions(batch.subscriptionIds);
  }

  /**
   * Gives claims back unattempted: each row pending again at its `nextAttemptAt`, its attempt
   * uncounted, if that claim is still its own (see recordOutcomes).
   */
  private async giveBack(
    givenBack: ReadonlyArray<{ id: string; claimedAt: string; nextAttemptAt: string }>,
  ): Promise<void> {
    if (givenBack.length > 0)
      await this.givenBackStatement(jsonRowsOf(givenBack, GIVEN_BACK_COLUMNS));
  }

  /** The claims given back's statement (`rows`: see GIVEN_BACK_COLUMNS), compiled once. */
  private readonly givenBackStatement = prepare(
    this.db,
    (rows: string) => sql`
      with v as ${jsonRows(this.dialect, rows, GIVEN_BACK_COLUMNS)}
      update webhook_queue
      set claimed_at = null,
          claimed_by = null,
          next_attempt_at = v.next_attempt_at,
          attempts = webhook_queue.attempts - 1
      from v
      where ${keyIn(this.dialect, 'webhook_queue.delivery_id', sql`select id from v`)}
        and webhook_queue.delivery_id = v.id and webhook_queue.claimed_at = v.claimed_at`,
  );

  /**
   * Gives back, due now and uncounted, the rows claimed by `workerId` that it does not know of
   * (`known`): a claim whose answer it never got (a connection cut
   * mid-statement). The loop runs it between claims, so no claim of its own is under way.
   */
  async giveBackUnknown(workerId: string, known: readonly string[], now: string): Promise<number> {
    const result = await this.db
      .updateTable('webhookQueue')
      .set((eb) => ({
        claimedAt: null,
        claimedBy: null,
        nextAttemptAt: now,
        attempts: eb('attempts', '-', 1),
      }))
      // Through the claims' partial index (see webhook_queue_claimed_idx).
      .where('claimedAt', 'is not', null)
      .where('claimedBy', '=', workerId)
      .where(sql<boolean>`delivery_id not in ${jsonMembers(this.dialect, JSON.stringify(known))}`)
      .executeTakeFirst();
    return Number(result.numUpdatedRows);
  }

  /**
   * Settles a batch of attempts, each only if the same claim is still its own: a retried row's
   * queue row due again, a delivered or dead-lettered one's removed, then the history of those
   * (status, attempts, the answer). A null lastResponseStatus (no answer) keeps the last one the
   * endpoint gave. One statement either way: on PostgreSQL its queue writes are in its WITH; on
   * SQLite, which has no writes there, a trigger moves each history row's queue row.
   */
  async recordOutcomes(outcomes: readonly DeliveryOutcome[]): Promise<void> {
    if (outcomes.length === 0) return;
    const rows = jsonRowsOf(outcomes, OUTCOME_COLUMNS);
    await (this.dialect === 'postgres' ? this.settledStatement : this.historyStatement)(rows);
  }

  /**
   * The history of a settlement, from `v` (see OUTCOME_COLUMNS). `claimed_at` names the claim
   * settled: SQLite's trigger moves the queue row that still holds it (reads take a claim's time
   * from the queue, so the history's is never shown).
   */
  private readonly historySet = sql`status = v.status,
          attempts = v.attempts,
          last_response_status = coalesce(v.last_response_status, webhook_deliveries.last_response_status),
          next_attempt_at = v.next_attempt_at,
          delivered_at = v.delivered_at,
          last_error = v.last_error,
          claimed_at = v.claimed_at,
          claimed_by = null,
          worker_losses = 0`;

  /** PostgreSQL's settlement in one statement (`rows`: see OUTCOME_COLUMNS), compiled once. */
  private readonly settledStatement = prepare(
    this.db,
    (rows: string) => sql`
      with v as ${jsonRows(this.dialect, rows, OUTCOME_COLUMNS)},
      retried as (
        update webhook_queue q
        set next_attempt_at = v.next_attempt_at, claimed_at = null, claimed_by = null,
          worker_losses = 0
        from v
        where ${keyIn(this.dialect, 'q.delivery_id', sql`select id from v where status = ${RETRIED}`)}
          and q.delivery_id = v.id and q.claimed_at = v.claimed_at
        returning q.delivery_id),
      finished as (
        delete from webhook_queue q using v
        where ${keyIn(this.dialect, 'q.delivery_id', sql`select id from v where status <> ${RETRIED}`)}
          and q.delivery_id = v.id and q.claimed_at = v.claimed_at
        returning q.delivery_id)
      update webhook_deliveries
      set ${this.historySet}
      from v
      where webhook_deliveries.id = v.id and v.id in (
        select delivery_id from retried union all select delivery_id from finished)`,
  );

  /**
   * SQLite's settlement (`rows`: see OUTCOME_COLUMNS), compiled once: the history of the rows
   * whose claim is still their own; each row's queue row follows it (a trigger, migration 0032).
   */
  private readonly historyStatement = prepare(
    this.db,
    (rows: string) => sql`
      with v as ${jsonRows(this.dialect, rows, OUTCOME_COLUMNS)}
      update webhook_deliveries
      set ${this.historySet}
      from v
      where webhook_deliveries.id = v.id and exists (
        select 1 from webhook_queue q where q.delivery_id = v.id and q.claimed_at = v.claimed_at)`,
  );

  /** Records finished attempts (see WebhookAttemptsTable) in one statement. */
  private async insertAttempts(rows: Insertable<WebhookAttemptsTable>[]): Promise<void> {
    if (rows.length > 0) await this.attemptsStatement(jsonRowsOf(rows, ATTEMPT_COLUMNS));
  }

  /** The attempts' statement (`rows`: see ATTEMPT_COLUMNS), compiled once. */
  private readonly attemptsStatement = prepare(
    this.db,
    (rows: string) => sql`
      insert into webhook_attempts (${sql.join(ATTEMPT_COLUMNS.map(([name]) => sql.ref(name)))})
      select * from ${jsonRows(this.dialect, rows, ATTEMPT_COLUMNS)} as v`,
  );

  /**
   * Locks the subscriptions whose counters a batch of outcomes changes (see lockedRows: beside
   * the events' transactions inserting delivery rows under them), in id order so two workers
   * cannot deadlock.
   */
  private lockSubscriptions(ids: string[]): Promise<Selectable<WebhookSubscriptionsTable>[]> {
    return this.subscriptionsLocked(JSON.stringify(ids));
  }

  /** `ids`: a JSON array; compiled once. */
  private readonly subscriptionsLocked = prepare(this.db, (ids: string) =>
    this.lockedRows(
      this.db
        .selectFrom('webhookSubscriptions')
        .selectAll()
        .where(jsonKeyIn(this.dialect, 'id', ids))
        .orderBy('id'),
    ),
  );

  /** Crash loops (see deadLetterAbandoned), the oldest claim first, at most `limit`. */
  async crashLoops(asker: string, aliveSince: string, staleBefore: string, limit: number) {
    const rows = await this.db
      .selectFrom('webhookQueue as d')
      .select('d.deliveryId')
      .where(abandoned('d', aliveSince, staleBefore, asker))
      .where('d.workerLosses', '>=', WORKER_LOSSES_LIMIT - 1)
      .orderBy('d.claimedAt')
      .limit(limit)
      .execute();
    return rows.map((row) => row.deliveryId);
  }

  /**
   * Dead-letters a crash loop's row, if it still is one (else undefined): an abandoned claim whose
   * claims died with their worker WORKER_LOSSES_LIMIT times in a row, this one included.
   * `worker_lost`, and the attempt cut off uncounted, like every attempt lost to a crash.
   */
  async deadLetterAbandoned(id: string, asker: string, aliveSince: string, staleBefore: string) {
    const lost = await this.db
      .deleteFrom('webhookQueue as d')
      .where('d.deliveryId', '=', id)
      .where(abandoned('d', aliveSince, staleBefore, asker))
      .where('d.workerLosses', '>=', WORKER_LOSSES_LIMIT - 1)
      // Unqualified: SQLite's RETURNING takes no table alias.
      .returning(['attempts', 'workerLosses'])
      .executeTakeFirst();
    if (lost === undefined) return undefined;
    return this.db
      .updateTable('webhookDeliveries')
      .set({
        status: DELIVERY_MOVES.deadLetter.to,
        claimedAt: null,
        claimedBy: null,
        nextAttemptAt: null,
        lastError: 'worker_lost',
        attempts: lost.attempts - 1,
        workerLosses: lost.workerLosses + 1,
      })
      .where('id', '=', id)
      .returning(['id', 'tenantId', 'subscriptionId', 'eventId', 'eventType', 'attempts', 'isTest'])
      .executeTakeFirstOrThrow();
  }
}
