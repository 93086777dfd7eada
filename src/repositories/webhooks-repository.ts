import { type Insertable, type Selectable, sql, type Updateable } from 'kysely';
import { type JsonColumn, jsonRows, jsonRowsOf } from '../db/json-params.ts';
import { prepare } from '../db/prepared.ts';
import type {
  DeliveryStatus,
  WebhookAttemptsTable,
  WebhookDeliveriesTable,
  WebhookMissedEventsTable,
  WebhookSubscriptionsTable,
} from '../db/schema.ts';
import type { Ordering } from '../domain/flow-control.ts';
import { DELIVERY_STATUS } from '../domain/webhook-moves.ts';
import { Repository } from './repository.ts';

export type SubscriptionRow = Selectable<WebhookSubscriptionsTable>;
/** A delivery as reads show it (see shownDeliveries). */
export type DeliveryRow = Omit<Selectable<WebhookDeliveriesTable>, 'claimedBy' | 'workerLosses'>;

const IN_FLIGHT = sql.lit(DELIVERY_STATUS.inFlight);
export type AttemptRow = Selectable<WebhookAttemptsTable>;

/** What a batch of attempts folds into a subscription (see foldAttempts, foldConcurrency). */
export interface SubscriptionFold {
  tenantId: string;
  id: string;
  consecutiveFailures: number;
  clientErrorRun: number;
  clientErrorRunSince: string | null;
  lastSuccessAt: string | null;
  lastFailureAt: string | null;
  concurrencyLimit: number;
  /** 1 or 0, as the column keeps it. */
  backedOff: number;
  /** A hold to set; null keeps the one it has. */
  heldUntil: string | null;
}

/** A fold's columns in its statement's JSON parameter (see jsonRows). */
const FOLD_COLUMNS: readonly JsonColumn[] = [
  ['tenant_id', 'text', 'tenantId'],
  ['id', 'text', 'id'],
  ['consecutive_failures', 'integer', 'consecutiveFailures'],
  ['client_error_run', 'integer', 'clientErrorRun'],
  ['client_error_run_since', 'text', 'clientErrorRunSince'],
  ['last_success_at', 'text', 'lastSuccessAt'],
  ['last_failure_at', 'text', 'lastFailureAt'],
  ['concurrency_limit', 'integer', 'concurrencyLimit'],
  ['backed_off', 'integer', 'backedOff'],
  ['held_until', 'text', 'heldUntil'],
];

/** One event of a subscription's ledger with its latest delivery (see `ledger`). */
export interface LedgerRow {
  sequence: number;
  deliveryId: string;
  status: DeliveryStatus;
  eventId: string;
  type: string;
  data: string;
  createdAt: string;
}

export class WebhooksRepository extends Repository {
  insertSubscription(row: Insertable<WebhookSubscriptionsTable>): Promise<SubscriptionRow> {
    return this.db
      .insertInto('webhookSubscriptions')
      .values(row)
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  /** Newest first, deleted ones included (active false). */
  listSubscriptions(tenantId: string): Promise<SubscriptionRow[]> {
    return this.db
      .selectFrom('webhookSubscriptions')
      .selectAll()
      .where('tenantId', '=', tenantId)
      .orderBy('id', 'desc')
      .execute();
  }

  findSubscription(tenantId: string, id: string): Promise<SubscriptionRow | undefined> {
    return this.db
      .selectFrom('webhookSubscriptions')
      .selectAll()
      .where('tenantId', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  /** One subscription's sealed signing key, whichever (the SECRET_KEY check of old databases). */
  anySigningKey(): Promise<Pick<SubscriptionRow, 'id' | 'signingKey'> | undefined> {
    return this.db
      .selectFrom('webhookSubscriptions')
      .select(['id', 'signingKey'])
      .limit(1)
      .executeTakeFirst();
  }

  /** A delivery's subscription, by the delivery's id alone (the operator CLI). */
  findDeliverySubscription(deliveryId: string): Promise<string | undefined> {
    return this.db
      .selectFrom('webhookDeliveries')
      .select('subscriptionId')
      .where('id', '=', deliveryId)
      .executeTakeFirst()
      .then((row) => row?.subscriptionId);
  }

  findSubscriptionTenant(id: string): Promise<string | undefined> {
    return this.owningTenant('webhookSubscriptions', id);
  }

  /** Subscriptions that count against the endpoint cap: all but deleted ones. */
  async countLive(tenantId: string): Promise<number> {
    const row = await this.db
      .selectFrom('webhookSubscriptions')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('tenantId', '=', tenantId)
      .where('deletedAt', 'is', null)
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }

  /**
   * The subscription unless deleted, locked (see lockedRows), for a change decided on what it
   * holds (its key), beside the deliveries inserted under it.
   */
  lockLiveSubscription(tenantId: string, id: string): Promise<SubscriptionRow | undefined> {
    return this.lockedRows(
      this.db
        .selectFrom('webhookSubscriptions')
        .selectAll()
        .where('tenantId', '=', tenantId)
        .where('id', '=', id)
        .where('deletedAt', 'is', null),
    ).executeTakeFirst();
  }

  /** Sets each subscription's fold (see SubscriptionFold), in one statement. */
  async setFolds(folds: readonly SubscriptionFold[]): Promise<void> {
    if (folds.length > 0) await this.foldsStatement(jsonRowsOf(folds, FOLD_COLUMNS));
  }

  /** `rows`: see FOLD_COLUMNS; compiled once. */
  private readonly foldsStatement = prepare(
    this.db,
    (rows: string) => sql`
      with v as ${jsonRows(this.dialect, rows, FOLD_COLUMNS)}
      update webhook_subscriptions
      set consecutive_failures = v.consecutive_failures,
          client_error_run = v.client_error_run,
          client_error_run_since = v.client_error_run_since,
          last_success_at = v.last_success_at,
          last_failure_at = v.last_failure_at,
          concurrency_limit = v.concurrency_limit,
          backed_off = v.backed_off,
          held_until = coalesce(v.held_until, webhook_subscriptions.held_until)
      from v
      where webhook_subscriptions.tenant_id = v.tenant_id and webhook_subscriptions.id = v.id`,
  );

  /**
   * `onlyLive`: a deleted subscription is left as it is (a conditional update: of concurrent
   * callers, those that come after a delete find none); undefined when none was changed.
   */
  updateSubscription(
    tenantId: string,
    id: string,
    patch: Updateable<WebhookSubscriptionsTable>,
    options: { onlyLive?: boolean } = {},
  ): Promise<SubscriptionRow | undefined> {
    let query = this.db
      .updateTable('webhookSubscriptions')
      .set(patch)
      .where('tenantId', '=', tenantId)
      .where('id', '=', id);
    if (options.onlyLive) query = query.where('deletedAt', 'is', null);
    return query.returningAll().executeTakeFirst();
  }

  /**
   * The tenant's subscriptions but deleted ones, active or paused, with their events lists (JSON):
   * for the fan-out and the test fire.
   */
  liveSubscriptions(tenantId: string) {
    return this.db
      .selectFrom('webhookSubscriptions')
      .select(['id', 'events', 'active', 'filter'])
      .where('tenantId', '=', tenantId)
      .where('deletedAt', 'is', null)
      .execute();
  }

  /** Events paused subscriptions got no delivery for (see recover with `missed`). */
  async insertMissed(rows: Insertable<WebhookMissedEventsTable>[]): Promise<void> {
    if (rows.length > 0) await this.db.insertInto('webhookMissedEvents').values(rows).execute();
  }

  /** How many events of the window the subscription missed while paused. */
  async countMissed(tenantId: string, id: string, since: string, until: string): Promise<number> {
    const row = await this.db
      .selectFrom('webhookMissedEvents')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('tenantId', '=', tenantId)
      .where('subscriptionId', '=', id)
      .where('eventCreatedAt', '>=', since)
      .where('eventCreatedAt', '<', until)
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }

  /** Removes and returns the window's missed events, oldest first (in the caller's transaction). */
  async takeMissed(tenantId: string, id: string, since: string, until: string) {
    const rows = await this.db
      .selectFrom('webhookMissedEvents')
      .selectAll()
      .where('tenantId', '=', tenantId)
      .where('subscriptionId', '=', id)
      .where('eventCreatedAt', '>=', since)
      .where('eventCreatedAt', '<', until)
      .orderBy('eventCreatedAt')
      .orderBy('eventId')
      .execute();
    if (rows.length > 0) {
      await this.db
        .deleteFrom('webhookMissedEvents')
        .where('tenantId', '=', tenantId)
        .where('subscriptionId', '=', id)
        .where(
          'eventId',
          'in',
          rows.map((row) => row.eventId),
        )
        .execute();
    }
    return rows;
  }

  /**
   * Takes each subscription's next `count` sequences in one statement (a counter row at `count`
   * the first time, else its number plus `count`) and returns the last of them. The counter rows
   * stay locked until the transaction ends, so the numbers are handed out in commit order and a
   * rollback gives them back: no gap, no reuse. Ids are sorted so that transactions sharing
   * subscriptions lock them in one order.
   */
  async takeSequences(
    tenantId: string,
    subscriptionIds: string[],
    count = 1,
  ): Promise<Map<string, number>> {
    const rows = await this.db
      .insertInto('webhookSequences')
      .values(
        [...subscriptionIds]
          .sort()
          .map((subscriptionId) => ({ subscriptionId, tenantId, lastSequence: count })),
      )
      .onConflict((conflict) =>
        conflict
          .column('subscriptionId')
          .doUpdateSet((eb) => ({ lastSequence: eb('webhookSequences.lastSequence', '+', count) })),
      )
      .returning(['subscriptionId', 'lastSequence'])
      .execute();
    return new Map(rows.map((row) => [row.subscriptionId, row.lastSequence]));
  }

  /** The subscription's last sequence taken; 0 before its first event. */
  async lastSequence(tenantId: string, subscriptionId: string): Promise<number> {
    const row = await this.db
      .selectFrom('webhookSequences')
      .select('lastSequence')
      .where('tenantId', '=', tenantId)
      .where('subscriptionId', '=', subscriptionId)
      .executeTakeFirst();
    return row?.lastSequence ?? 0;
  }

  /**
   * The ledger after `after`, by sequence: per sequence its newest delivery (the original or its
   * latest redelivery) with the event; `type` and `deliveryStatus` filter on those. `newestFirst`
   * reads it from its end (the last `limit` events).
   */
  async ledger(
    tenantId: string,
    subscriptionId: string,
    query: {
      after: number;
      limit: number;
      type?: string;
      deliveryStatus?: DeliveryStatus;
      newestFirst?: boolean;
    },
  ): Promise<LedgerRow[]> {
    let select = this.db
      .selectFrom('webhookDeliveries as d')
      .innerJoin('events as e', 'e.id', 'd.eventId')
      .leftJoin('webhookQueue as q', 'q.deliveryId', 'd.id')
      .select([
        'd.sequence',
        'd.id as deliveryId',
        shownStatus().as('status'),
        'd.eventId',
        'e.type',
        'e.data',
        'e.createdAt',
      ])
      .where('d.tenantId', '=', tenantId)
      .where('d.subscriptionId', '=', subscriptionId)
      .where('d.sequence', '>', query.after)
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom('webhookDeliveries as n')
              .select('n.id')
              .whereRef('n.subscriptionId', '=', 'd.subscriptionId')
              .whereRef('n.sequence', '=', 'd.sequence')
              .whereRef('n.id', '>', 'd.id'),
          ),
        ),
      );
    if (query.type !== undefined) select = select.where('d.eventType', '=', query.type);
    if (query.deliveryStatus !== undefined) {
      select = select.where(shownStatus(), '=', query.deliveryStatus);
    }
    return (await select
      .orderBy('d.sequence', query.newestFirst === true ? 'desc' : 'asc')
      .limit(query.limit)
      .execute()) as LedgerRow[];
  }

  /**
   * The first sequence in (after, upTo] with no delivery left (retention removed it), or null
   * when every one is there. Counted first, walked only when one is missing.
   */
  async firstMissingSequence(
    tenantId: string,
    subscriptionId: string,
    after: number,
    upTo: number,
  ): Promise<number | null> {
    if (upTo <= after) return null;
    const inRange = this.db
      .selectFrom('webhookDeliveries')
      .where('tenantId', '=', tenantId)
      .where('subscriptionId', '=', subscriptionId)
      .where('sequence', '>', after)
      .where('sequence', '<=', upTo);
    const counted = await inRange
      .select((eb) => eb.fn.count<number>('sequence').distinct().as('count'))
      .executeTakeFirstOrThrow();
    if (Number(counted.count) === upTo - after) return null;
    const kept = await inRange.select('sequence').distinct().orderBy('sequence').execute();
    let expected = after + 1;
    for (const row of kept) {
      if (row.sequence !== expected) return expected;
      expected += 1;
    }
    return expected;
  }

  /** The oldest sequence after `after` still kept, or null. */
  async firstKeptSequence(
    tenantId: string,
    subscriptionId: string,
    after: number,
  ): Promise<number | null> {
    const row = await this.db
      .selectFrom('webhookDeliveries')
      .select((eb) => eb.fn.min('sequence').as('first'))
      .where('tenantId', '=', tenantId)
      .where('subscriptionId', '=', subscriptionId)
      .where('sequence', '>', after)
      .executeTakeFirst();
    return row?.first === null || row?.first === undefined ? null : Number(row.first);
  }

  /**
   * The queued rows of a subscription whose ordering changes (under its lock): only a
   * `per_object` subscription's queue rows carry their object and sequence (the claim's
   * per-object rule walks no other), so they take them from the history, or drop them.
   */
  async orderQueued(tenantId: string, subscriptionId: string, ordering: Ordering): Promise<void> {
    const fromHistory = (column: string) =>
      ordering === 'per_object'
        ? sql`(select ${sql.ref(`d.${column}`)} from webhook_deliveries d where d.id = webhook_queue.delivery_id)`
        : sql`null`;
    await sql`update webhook_queue
      set object_key = ${fromHistory('object_key')}, sequence = ${fromHistory('sequence')}
      where subscription_id = ${subscriptionId} and exists (
        select 1 from webhook_subscriptions s where s.id = ${subscriptionId} and s.tenant_id = ${tenantId})`.execute(
      this.db,
    );
  }

  /** The queue row of each pending one comes from the database (see migration 0032). */
  insertDeliveries(rows: Insertable<WebhookDeliveriesTable>[]) {
    return this.db.insertInto('webhookDeliveries').values(rows).execute();
  }

  /** Newest first, keyset on id (descending). */
  listDeliveries(
    tenantId: string,
    subscriptionId: string,
    filter: {
      beforeId: string | null;
      limit: number;
      status?: DeliveryStatus;
      eventType?: string;
    },
  ): Promise<DeliveryRow[]> {
    let query = this.shownDeliveries()
      .where('d.tenantId', '=', tenantId)
      .where('d.subscriptionId', '=', subscriptionId);
    if (filter.beforeId !== null) query = query.where('d.id', '<', filter.beforeId);
    if (filter.status !== undefined) query = query.where(shownStatus(), '=', filter.status);
    if (filter.eventType !== undefined) query = query.where('d.eventType', '=', filter.eventType);
    return query
      .orderBy('d.id', 'desc')
      .limit(filter.limit + 1)
      .execute();
  }

  /** The stored JSON of an event's data (gone after retention). */
  async eventData(tenantId: string, eventId: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('events')
      .select('data')
      .where('tenantId', '=', tenantId)
      .where('id', '=', eventId)
      .executeTakeFirst();
    return row?.data;
  }

  findDelivery(
    tenantId: string,
    subscriptionId: string,
    id: string,
  ): Promise<DeliveryRow | undefined> {
    return this.shownDeliveries()
      .where('d.tenantId', '=', tenantId)
      .where('d.subscriptionId', '=', subscriptionId)
      .where('d.id', '=', id)
      .executeTakeFirst();
  }

  /**
   * Deliveries as reads show them: the history, and while one is claimed its claim from the
   * queue (in flight, its attempt counted; the history is not written on a claim), and while it
   * waits its due time there (a claim given back moves only that).
   */
  private shownDeliveries() {
    return this.db
      .selectFrom('webhookDeliveries as d')
      .leftJoin('webhookQueue as q', 'q.deliveryId', 'd.id')
      .select((eb) => [
        'd.id',
        'd.tenantId',
        'd.subscriptionId',
        'd.eventId',
        'd.eventType',
        shownStatus().as('status'),
        shownAttempts().as('attempts'),
        'd.lastResponseStatus',
        eb.fn.coalesce('q.nextAttemptAt', 'd.nextAttemptAt').as('nextAttemptAt'),
        'd.deliveredAt',
        'q.claimedAt',
        'd.redeliveredFromId',
        'd.lastError',
        'd.isTest',
        'd.sequence',
        'd.objectKey',
        'd.createdAt',
      ]);
  }

  /**
   * Deliveries per subscription and status with an id from `sinceId` on (a time range: ids sort
   * by creation), walked through webhook_deliveries_subscription_idx (subscription_id, id): the
   * cost is that window's rows, never the table's.
   */
  recentCounts(
    tenantId: string,
    subscriptionIds: string[],
    sinceId: string,
  ): Promise<Array<{ subscriptionId: string; status: DeliveryStatus; n: number }>> {
    if (subscriptionIds.length === 0) return Promise.resolve([]);
    return this.db
      .selectFrom('webhookDeliveries')
      .select((eb) => ['subscriptionId', 'status', eb.fn.countAll<number>().as('n')])
      .where('tenantId', '=', tenantId)
      .where('subscriptionId', 'in', subscriptionIds)
      .where('id', '>=', sinceId)
      .where('isTest', '=', false)
      .groupBy(['subscriptionId', 'status'])
      .execute();
  }

  /** Each subscription's deliveries in flight, through the queue's partial claims index. */
  inFlightCounts(
    tenantId: string,
    subscriptionIds: string[],
  ): Promise<Array<{ subscriptionId: string; n: number }>> {
    if (subscriptionIds.length === 0) return Promise.resolve([]);
    return this.db
      .selectFrom('webhookQueue as q')
      .innerJoin('webhookSubscriptions as s', 's.id', 'q.subscriptionId')
      .select((eb) => ['q.subscriptionId', eb.fn.countAll<number>().as('n')])
      .where('q.subscriptionId', 'in', subscriptionIds)
      .where('q.claimedAt', 'is not', null)
      .where('s.tenantId', '=', tenantId)
      .groupBy('q.subscriptionId')
      .execute();
  }

  /** Dead-lettered deliveries of a subscription created in [since, until). */
  async countDeadLetters(
    tenantId: string,
    subscriptionId: string,
    since: string,
    until: string,
  ): Promise<number> {
    const row = await this.db
      .selectFrom('webhookDeliveries')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('tenantId', '=', tenantId)
      .where('subscriptionId', '=', subscriptionId)
      .where('status', '=', DELIVERY_STATUS.deadLetter)
      .where('createdAt', '>=', since)
      .where('createdAt', '<', until)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** The next `limit` of those, by id after `afterId`: what a recovery redelivers. */
  deadLetters(
    tenantId: string,
    subscriptionId: string,
    window: { since: string; until: string; afterId: string | null; limit: number },
  ): Promise<
    Pick<DeliveryRow, 'id' | 'eventId' | 'eventType' | 'isTest' | 'sequence' | 'objectKey'>[]
  > {
    let query = this.db
      .selectFrom('webhookDeliveries')
      .select(['id', 'eventId', 'eventType', 'isTest', 'sequence', 'objectKey'])
      .where('tenantId', '=', tenantId)
      .where('subscriptionId', '=', subscriptionId)
      .where('status', '=', DELIVERY_STATUS.deadLetter)
      .where('createdAt', '>=', window.since)
      .where('createdAt', '<', window.until);
    if (window.afterId !== null) query = query.where('id', '>', window.afterId);
    return query.orderBy('id').limit(window.limit).execute();
  }

  /** A delivery's attempts, newest first, keyset on id (descending). */
  listAttempts(
    tenantId: string,
    deliveryId: string,
    filter: { beforeId: string | null; limit: number },
  ): Promise<AttemptRow[]> {
    let query = this.db
      .selectFrom('webhookAttempts')
      .selectAll()
      .where('tenantId', '=', tenantId)
      .where('deliveryId', '=', deliveryId);
    if (filter.beforeId !== null) query = query.where('id', '<', filter.beforeId);
    return query
      .orderBy('id', 'desc')
      .limit(filter.limit + 1)
      .execute();
  }
}

/**
 * A delivery's status as reads show it: in flight while the queue row `q` holds a claim, else
 * the history `d`'s (see shownDeliveries).
 */
export function shownStatus() {
  return sql<DeliveryStatus>`case when q.claimed_at is not null then ${IN_FLIGHT} else d.status end`;
}

/** Its attempts as reads show them: the claimed attempt counted while `q` holds a claim. */
export function shownAttempts() {
  return sql<number>`case when q.claimed_at is not null then q.attempts else d.attempts end`;
}
