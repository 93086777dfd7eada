import { type Insertable, type Selectable, sql } from 'kysely';
import {
  type JsonColumn,
  jsonKeyIn,
  jsonMembers,
  jsonRows,
  jsonRowsOf,
} from '../db/json-params.ts';
import { prepare } from '../db/prepared.ts';
import type { WebhookAttemptsTable, WebhookSubscriptionsTable } from '../db/schema.ts';
import { WORKER_LOSSES_LIMIT } from '../domain/attempts.ts';
import { EFFECTIVE_CONCURRENCY_LIMIT_SQL } from '../domain/flow-control.ts';
import { DELIVERY_MOVES } from '../domain/webhook-moves.ts';
import { Repository } from '../repositories/repository.ts';
import { abandoned, claimStatement } from './claim-sql.ts';
import type { ClaimedDelivery, DeliveryOutcome } from './types.ts';

const { giveBack } = DELIVERY_MOVES;
/** An attempt's outcome (DELIVERY_MOVES retry, deliver, deadLetter) settles an in-flight row. */
const SETTLED_FROM = DELIVERY_MOVES.retry.from;
/** A claim given back, its columns in its statement's JSON parameter (see jsonRows). */
const GIVEN_BACK_COLUMNS: readonly JsonColumn[] = [
  ['id', 'text', 'id'],
  ['claimed_at', 'text', 'claimedAt'],
  ['next_attempt_at', 'text', 'nextAttemptAt'],
];
/** An outcome's columns in its statement's JSON parameter (see jsonRows). */
const OUTCOME_COLUMNS: readonly JsonColumn[] = [
  ['id', 'text', 'id'],
  ['claimed_at', 'text', 'claimedAt'],
  ['status', 'text', 'status'],
  ['last_response_status', 'integer', 'lastResponseStatus'],
  ['next_attempt_at', 'text', 'nextAttemptAt'],
  ['delivered_at', 'text', 'deliveredAt'],
  ['last_error', 'text', 'lastError'],
];
/** An attempt's, in the attempt log's columns (see WebhookAttemptsTable). */
const ATTEMPT_COLUMNS: readonly JsonColumn[] = [
  ['id', 'text', 'id'],
  ['tenant_id', 'text', 'tenantId'],
  ['delivery_id', 'text', 'deliveryId'],
  ['attempt', 'integer', 'attempt'],
  ['started_at', 'text', 'startedAt'],
  ['duration_ms', 'integer', 'durationMs'],
  ['status', 'integer', 'status'],
  ['error_class', 'text', 'errorClass'],
  ['response_body', 'text', 'responseBody'],
  ['retry_after', 'text', 'retryAfter'],
  ['concurrency_limit', 'integer', 'concurrencyLimit'],
  ['cancelled', 'integer', 'cancelled'],
];

export interface ClaimOptions {
  /** The claiming worker (webhook_workers.id). */
  workerId: string;
  /** Claims whose worker's heartbeat is older than this are abandoned (ISO 8601). */
  aliveSince: string;
  /** Claims without a worker (older versions) are abandoned once older than this. */
  staleBefore: string;
  /** Most rows of one subscription. */
  rowsPerSubscription: number;
  /**
   * How far ahead a capped subscription's next slot may be for it to be claimed for (µs); null
   * claims no capped subscription's rows.
   */
  paceHorizonUs: number | null;
  /** Subscriptions to leave alone (at their level in this worker, or held). */
  skip?: readonly string[];
  /** Most rows of each tenant listed, over all its subscriptions. */
  tenantRoom?: ReadonlyMap<string, number>;
  /** Most rows of a tenant not listed. */
  newcomerRoom?: number;
  skipTenants?: readonly string[];
  /**
   * Deliveries whose attempt this worker finished but has not recorded yet: their rows are still
   * in flight, their slots free. By id, not by count: one recorded while the claim runs must not
   * be taken off twice.
   */
  settled?: readonly string[];
}

/**
 * The delivery queue's statements: claim, give back, record outcomes and attempts, dead-letter
 * crash loops, the worker registry (the queue's figures are read in stats.ts; the pace of capped
 * subscriptions in pace-sql.ts). They span tenants: the queue is one, whoever's rows are in it.
 */
export class DeliveryQueue extends Repository {
  /** Claims up to `limit` due rows for `options.workerId` (claimStatement): what sending needs. */
  async claim(now: Date, limit: number, options: ClaimOptions): Promise<ClaimedDelivery[]> {
    const at = now.toISOString();
    const nowUs = now.getTime() * 1000;
    const claimed = await this.claimRows(
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
    );
    if (claimed.length === 0) return [];
    return this.claimedRows(at, JSON.stringify(claimed.map((row) => row.id))) as Promise<
      ClaimedDelivery[]
    >;
  }

  private readonly claimRows = prepare(
    this.db,
    (
      now: string,
      nowUs: number,
      paceHorizonUs: number,
      workerId: string,
      aliveSince: string,
      staleBefore: string,
      limit: number,
      rowsPerSubscription: number,
      newcomerRoom: number,
      skip: string,
      skipTenants: string,
      rooms: string,
      settled: string,
    ) =>
      claimStatement(this.dialect, {
        now,
        nowUs,
        paceHorizonUs,
        workerId,
        aliveSince,
        staleBefore,
        limit,
        rowsPerSubscription,
        newcomerRoom,
        skip,
        skipTenants,
        rooms,
        settled,
      }),
  );

  /** What sending each claimed row needs (`ids`: a JSON array), compiled once. */
  private readonly claimedRows = prepare(this.db, (now: string, ids: string) =>
    this.db
      .selectFrom('webhookDeliveries as d')
      .innerJoin('events as e', 'e.id', 'd.eventId')
      .innerJoin('webhookSubscriptions as s', 's.id', 'd.subscriptionId')
      .select([
        'd.id',
        'd.tenantId',
        'd.subscriptionId',
        'd.eventId',
        'd.eventType',
        'd.attempts',
        'd.claimedAt',
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
      ])
      .where(jsonKeyIn(this.dialect, 'd.id', ids))
      .where('d.claimedAt', '=', now),
  );

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
      update webhook_deliveries
      set status = ${sql.lit(giveBack.to)},
          claimed_at = null,
          claimed_by = null,
          next_attempt_at = v.next_attempt_at,
          attempts = webhook_deliveries.attempts - 1
      from v
      where webhook_deliveries.id = v.id
        and webhook_deliveries.status = ${sql.lit(giveBack.from)}
        and webhook_deliveries.claimed_at = v.claimed_at`,
  );

  /**
   * Gives back, due now and uncounted, the rows claimed by `workerId` that it does not know of
   * (`known`): a claim whose answer it never got (a connection cut
   * mid-statement). The loop runs it between claims, so no claim of its own is under way.
   */
  async giveBackUnknown(workerId: string, known: readonly string[], now: string): Promise<number> {
    const result = await this.db
      .updateTable('webhookDeliveries')
      .set((eb) => ({
        status: giveBack.to,
        claimedAt: null,
        claimedBy: null,
        nextAttemptAt: now,
        attempts: eb('attempts', '-', 1),
      }))
      // A literal: the in-flight rows' partial index serves it (see PENDING in claim-sql.ts).
      .where('status', '=', sql.lit(giveBack.from))
      .where('claimedBy', '=', workerId)
      .where(sql<boolean>`id not in ${jsonMembers(this.dialect, JSON.stringify(known))}`)
      .executeTakeFirst();
    return Number(result.numUpdatedRows);
  }

  /**
   * Settles a batch of attempts in one statement (both backends run UPDATE … FROM a VALUES list);
   * each row only if the same claim is still its own. A null lastResponseStatus (no answer) keeps
   * the last one the endpoint gave.
   */
  async recordOutcomes(outcomes: readonly DeliveryOutcome[]): Promise<void> {
    if (outcomes.length > 0) await this.outcomesStatement(jsonRowsOf(outcomes, OUTCOME_COLUMNS));
  }

  /** The outcomes' statement (`rows`: see OUTCOME_COLUMNS), compiled once. */
  private readonly outcomesStatement = prepare(
    this.db,
    (rows: string) => sql`
      with v as ${jsonRows(this.dialect, rows, OUTCOME_COLUMNS)}
      update webhook_deliveries
      set status = v.status,
          last_response_status = coalesce(v.last_response_status, webhook_deliveries.last_response_status),
          next_attempt_at = v.next_attempt_at,
          delivered_at = v.delivered_at,
          last_error = v.last_error,
          claimed_at = null,
          claimed_by = null,
          worker_losses = 0
      from v
      where webhook_deliveries.id = v.id
        and webhook_deliveries.status = ${sql.lit(SETTLED_FROM)}
        and webhook_deliveries.claimed_at = v.claimed_at`,
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
      .selectFrom('webhookDeliveries as d')
      .select('d.id')
      .where(abandoned('d', aliveSince, staleBefore, asker))
      .where('d.workerLosses', '>=', WORKER_LOSSES_LIMIT - 1)
      .orderBy('d.claimedAt')
      .limit(limit)
      .execute();
    return rows.map((row) => row.id);
  }

  /**
   * Dead-letters a crash loop's row, if it still is one (else undefined): an abandoned claim whose
   * claims died with their worker WORKER_LOSSES_LIMIT times in a row, this one included.
   * `worker_lost`, and the attempt cut off uncounted, like every attempt lost to a crash.
   */
  async deadLetterAbandoned(id: string, asker: string, aliveSince: string, staleBefore: string) {
    return (
      this.db
        .updateTable('webhookDeliveries as d')
        .set((eb) => ({
          status: DELIVERY_MOVES.deadLetter.to,
          claimedAt: null,
          claimedBy: null,
          nextAttemptAt: null,
          lastError: 'worker_lost',
          attempts: eb('d.attempts', '-', 1),
          workerLosses: eb('d.workerLosses', '+', 1),
        }))
        .where('d.id', '=', id)
        .where(abandoned('d', aliveSince, staleBefore, asker))
        .where('d.workerLosses', '>=', WORKER_LOSSES_LIMIT - 1)
        // Unqualified: SQLite's RETURNING takes no table alias.
        .returning(['id', 'tenantId', 'subscriptionId', 'eventId', 'eventType', 'attempts'])
        .returning('isTest')
        .executeTakeFirst()
    );
  }

  /** How many workers other than `id` beat since `aliveSince`. */
  async otherLiveWorkers(id: string, aliveSince: string): Promise<number> {
    const row = await this.db
      .selectFrom('webhookWorkers')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('id', '<>', id)
      .where('heartbeatAt', '>=', aliveSince)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** Registers a worker, beating now. */
  async joinWorker(id: string, now: string): Promise<void> {
    await this.db
      .insertInto('webhookWorkers')
      .values({ id, startedAt: now, heartbeatAt: now })
      .onConflict((conflict) => conflict.column('id').doUpdateSet({ heartbeatAt: now }))
      .execute();
  }

  /** A worker's heartbeat; false when its row is gone (taken for dead: it joins again). */
  async heartbeat(id: string, now: string): Promise<boolean> {
    const result = await this.db
      .updateTable('webhookWorkers')
      .set({ heartbeatAt: now })
      .where('id', '=', id)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** A worker that stopped, or workers silent since `before` (their claims were taken over). */
  async forgetWorkers(filter: { id: string } | { before: string }): Promise<void> {
    let query = this.db.deleteFrom('webhookWorkers');
    query =
      'id' in filter
        ? query.where('id', '=', filter.id)
        : query.where('heartbeatAt', '<', filter.before);
    await query.execute();
  }
}
