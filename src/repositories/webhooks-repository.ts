import { type Insertable, type RawBuilder, type Selectable, sql, type Updateable } from 'kysely';
import { prepare } from '../db/prepared.ts';
import type {
  DeliveryStatus,
  WebhookAttemptsTable,
  WebhookDeliveriesTable,
  WebhookSubscriptionsTable,
} from '../db/schema.ts';
import type { AttemptErrorClass } from '../domain/attempts.ts';
import type { Ordering } from '../domain/flow-control.ts';
import { Repository } from './repository.ts';

/**
 * The statuses the partial queue indexes are defined on, written as literals: a planner can use a
 * partial index only when the query's condition visibly implies the index's (a bound parameter
 * does not, on SQLite, nor in a generic plan on PostgreSQL).
 */
const PENDING = sql<DeliveryStatus>`'pending'`;
const IN_FLIGHT = sql<DeliveryStatus>`'in_flight'`;

/** Seven bind parameters a row: far under both backends' limits. */
const OUTCOMES_PER_STATEMENT = 500;
/** maxAttempts when a claim has none: stale claims are taken over whatever their count. */
const NO_ATTEMPT_CAP = 2_147_483_647;
/** Ten bind parameters a row. */
const ATTEMPTS_PER_STATEMENT = 300;

export type SubscriptionRow = Selectable<WebhookSubscriptionsTable>;
export type DeliveryRow = Selectable<WebhookDeliveriesTable>;
export type AttemptRow = Selectable<WebhookAttemptsTable>;

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

/** A claimed delivery with what sending it needs. */
export interface ClaimedDelivery {
  id: string;
  tenantId: string;
  subscriptionId: string;
  eventId: string;
  eventType: string;
  attempts: number;
  claimedAt: string;
  data: string;
  /** A test fire's event: marked in the envelope, changes no counter. */
  isTest: boolean;
  /** The event's place in the subscription's ledger; null for a test fire. */
  sequence: number | null;
  url: string;
  standardWebhooks: boolean;
  /** The subscription's concurrency limit when claimed (within its maxConcurrency). */
  concurrencyLimit: number;
  /** Its cap on deliveries a second, or null. */
  maxPerSecond: number | null;
  ordering: Ordering;
  signingKey: string;
  legacySigningKey: string | null;
  legacySigningKeyExpiresAt: string | null;
  /** The `traceparent` stored with the event (its producer span), or null. */
  traceContext: string | null;
  /** Send the attempt's `traceparent` to the endpoint. */
  propagateTraceContext: boolean;
}

/** What one attempt changes on its delivery row (see WebhookWorker). */
export interface DeliveryOutcome {
  id: string;
  /** The claim being settled: a row reclaimed by another worker since is left alone. */
  claimedAt: string;
  status: DeliveryStatus;
  /** The endpoint's answer; null when it gave none (the last answer is then kept). */
  lastResponseStatus: number | null;
  /** The attempt's error class; null when its status tells all (or it delivered). */
  lastError: AttemptErrorClass | null;
  nextAttemptAt: string | null;
  deliveredAt: string | null;
}

export interface ClaimOptions {
  /** Most rows of one subscription. */
  perSubscription: number;
  /** Subscriptions to leave alone (at their cap in this worker). */
  skip?: string[];
  /** Most rows of each tenant listed, over all its subscriptions. */
  tenantRoom?: ReadonlyMap<string, number>;
  /** Most rows of a tenant not listed. */
  newcomerRoom?: number;
  skipTenants?: string[];
  /**
   * Deliveries whose attempt this worker finished but has not recorded yet: their rows are still
   * in flight, their slots free. By id, not by count: one recorded while the claim runs must not
   * be taken off twice.
   */
  settled?: readonly string[];
  /** Stale claims are taken over only with attempts left (see deadLetterStale). */
  maxAttempts?: number;
}

/** A subscription's concurrency limit, within the ceiling its owner set. */
function capOf(subscriptions: string): RawBuilder<number> {
  const limit = sql.ref(`${subscriptions}.concurrency_limit`);
  const max = sql.ref(`${subscriptions}.max_concurrency`);
  return sql<number>`case when ${limit} < ${max} then ${limit} else ${max} end`;
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

  /** The tenant's active subscriptions with their events lists (JSON), for the fan-out. */
  activeSubscriptions(tenantId: string) {
    return this.db
      .selectFrom('webhookSubscriptions')
      .select(['id', 'events'])
      .where('tenantId', '=', tenantId)
      .where('active', '=', true)
      .execute();
  }

  /**
   * Takes each subscription's next sequence in one statement (a counter row at 1 the first time,
   * else its number plus one). The counter rows stay locked until the transaction ends, so the
   * numbers are handed out in commit order and a rollback gives them back: no gap, no reuse. Ids
   * are sorted so that transactions sharing subscriptions lock them in one order.
   */
  async takeSequences(tenantId: string, subscriptionIds: string[]): Promise<Map<string, number>> {
    const rows = await this.db
      .insertInto('webhookSequences')
      .values(
        [...subscriptionIds]
          .sort()
          .map((subscriptionId) => ({ subscriptionId, tenantId, lastSequence: 1 })),
      )
      .onConflict((conflict) =>
        conflict
          .column('subscriptionId')
          .doUpdateSet((eb) => ({ lastSequence: eb('webhookSequences.lastSequence', '+', 1) })),
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
   * latest redelivery) with the event; `type` and `deliveryStatus` filter on those.
   */
  async ledger(
    tenantId: string,
    subscriptionId: string,
    query: { after: number; limit: number; type?: string; deliveryStatus?: DeliveryStatus },
  ): Promise<LedgerRow[]> {
    let select = this.db
      .selectFrom('webhookDeliveries as d')
      .innerJoin('events as e', 'e.id', 'd.eventId')
      .select([
        'd.sequence',
        'd.id as deliveryId',
        'd.status',
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
      select = select.where('d.status', '=', query.deliveryStatus);
    }
    return (await select.orderBy('d.sequence').limit(query.limit).execute()) as LedgerRow[];
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
    let query = this.db
      .selectFrom('webhookDeliveries')
      .selectAll()
      .where('tenantId', '=', tenantId)
      .where('subscriptionId', '=', subscriptionId);
    if (filter.beforeId !== null) query = query.where('id', '<', filter.beforeId);
    if (filter.status !== undefined) query = query.where('status', '=', filter.status);
    if (filter.eventType !== undefined) query = query.where('eventType', '=', filter.eventType);
    return query
      .orderBy('id', 'desc')
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
    return this.db
      .selectFrom('webhookDeliveries')
      .selectAll()
      .where('tenantId', '=', tenantId)
      .where('subscriptionId', '=', subscriptionId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  /**
   * Claims up to `limit` due deliveries in one statement: for every active subscription not in
   * `skip` and not held, its earliest due pending rows (at most `perSubscription`, and no more
   * than its concurrency limit less its attempts in flight; walked through
   * webhook_deliveries_pending_idx, so one endpoint's backlog costs the others nothing), the
   * earliest `limit` of them overall; and in-flight rows whose claim is older than `staleBefore`
   * (their worker died) and that have attempts left (see deadLetterStale). Each claimed row gets
   * `claimedAt` = now and its attempt counted. On PostgreSQL concurrent workers skip each other's
   * locked rows; SQLite runs the statement under its write lock, so no row is claimed twice
   * either way.
   */
  async claimDue(
    now: string,
    staleBefore: string,
    limit: number,
    options: ClaimOptions = { perSubscription: limit },
  ): Promise<ClaimedDelivery[]> {
    const claimed = await this.claimStatement(
      now,
      staleBefore,
      limit,
      Math.min(limit, options.perSubscription),
      Math.min(limit, options.newcomerRoom ?? limit),
      options.maxAttempts ?? NO_ATTEMPT_CAP,
      JSON.stringify(options.skip ?? []),
      JSON.stringify(options.skipTenants ?? []),
      JSON.stringify(Object.fromEntries(options.tenantRoom ?? [])),
      JSON.stringify(options.settled ?? []),
    );
    if (claimed.length === 0) return [];
    return this.claimedRows(now, JSON.stringify(claimed.map((row) => row.id))) as Promise<
      ClaimedDelivery[]
    >;
  }

  /**
   * The claim (see claimDue), compiled once: every list is one JSON parameter, so the text never
   * changes (and PostgreSQL plans it once per connection).
   */
  private readonly claimStatement = prepare(
    this.db,
    (
      now: string,
      staleBefore: string,
      limit: number,
      perSubscription: number,
      newcomerRoom: number,
      maxAttempts: number,
      skip: string,
      skipTenants: string,
      rooms: string,
      settled: string,
    ) => {
      const pg = this.dialect === 'postgres';
      // The members of a JSON array parameter, as a subquery.
      const members = (list: string) =>
        pg
          ? sql`(select jsonb_array_elements_text(cast(${list} as jsonb)))`
          : sql`(select value from json_each(${list}))`;
      // A `per_object` subscription's row waits while an earlier one of its object is still to
      // go (in flight, or pending with a lower sequence), through webhook_deliveries_object_idx.
      const inOrder = (
        row: string,
      ) => sql`(s.ordering = 'none' or ${sql.ref(`${row}.object_key`)} is null or not exists (
        select 1 from webhook_deliveries o
        where o.subscription_id = ${sql.ref(`${row}.subscription_id`)} and o.object_key = ${sql.ref(`${row}.object_key`)}
          and o.status in ('pending', 'in_flight')
          and (o.status = 'in_flight' or o.sequence < ${sql.ref(`${row}.sequence`)})))`;
      const eligible = sql`s.active = 1 and (s.held_until is null or s.held_until <= ${now})
        and s.id not in ${members(skip)} and s.tenant_id not in ${members(skipTenants)}`;
      // A subscription's rows are claimable while they and its attempts in flight (in every
      // worker process, counted through the partial in-flight index, less this worker's settled
      // ones) stay within its concurrency limit. Per subscription: LATERAL on PostgreSQL, its walk
      // limited to that room; on SQLite (no LATERAL, no correlated LIMIT) a correlated IN, with
      // CROSS JOIN keeping subscriptions the outer loop (else SQLite scans every delivery), and
      // the room applied to the rows it found.
      const candidates = pg
        ? sql`
          select q.id, q.next_attempt_at, s.tenant_id
          from webhook_subscriptions s
          cross join lateral (
            select count(*) as n from webhook_deliveries f
            where f.subscription_id = s.id and f.status = 'in_flight' and f.id not in ${members(settled)}
          ) b
          cross join lateral (
            select d.id, d.next_attempt_at from webhook_deliveries d
            where d.subscription_id = s.id and d.status = 'pending' and d.next_attempt_at <= ${now}
              and ${inOrder('d')}
            order by d.next_attempt_at
            limit greatest(0, least(cast(${perSubscription} as integer), ${capOf('s')} - b.n))
            for update of d skip locked
          ) q
          where ${eligible}`
        : sql`
          select id, next_attempt_at, tenant_id from (
            select d.id, d.next_attempt_at, s.tenant_id, ${capOf('s')} as cap,
              row_number() over (partition by s.id order by d.next_attempt_at) + coalesce(b.n, 0) as in_use
            from webhook_subscriptions s
            cross join webhook_deliveries d
            left join (
              select subscription_id, count(*) as n from webhook_deliveries
              where status = 'in_flight' and id not in ${members(settled)} group by subscription_id
            ) b on b.subscription_id = s.id
            where d.id in (
              select d2.id from webhook_deliveries d2
              where d2.subscription_id = s.id and d2.status = 'pending' and d2.next_attempt_at <= ${now}
                and ${inOrder('d2')}
              order by d2.next_attempt_at
              limit ${perSubscription}
            )
            and ${eligible}
          ) as within_room
          where in_use <= cap`;
      // Then at most a tenant's room of its rows (ranked over its subscriptions), the earliest due.
      const roomOf = pg
        ? sql`coalesce(cast(cast(${rooms} as jsonb) ->> ranked.tenant_id as integer), cast(${newcomerRoom} as integer))`
        : sql`coalesce((select r.value from json_each(${rooms}) as r where r.key = ranked.tenant_id), ${newcomerRoom})`;
      const due = sql`
        select id from (
          select id, next_attempt_at, tenant_id, row_number() over (partition by tenant_id order by next_attempt_at) as rank
          from (${candidates}) as candidates
        ) as ranked
        where rank <= ${roomOf}
        order by next_attempt_at
        limit ${limit}`;
      const stale = sql`
        select d.id from webhook_deliveries d
        join webhook_subscriptions s on s.id = d.subscription_id
        where d.status = 'in_flight' and d.claimed_at < ${staleBefore}
          and d.attempts < ${maxAttempts} and s.active = 1 and d.subscription_id not in ${members(skip)}
        order by d.claimed_at
        limit ${limit}
        ${this.skipLocked('d')}`;
      const chosen = sql`select id from (${due}) as due_rows union all select id from (${stale}) as stale_rows`;
      // The chosen ids are found by primary key (see keyIn).
      return sql<{ id: string }>`
        update webhook_deliveries
        set status = 'in_flight', claimed_at = ${now}, attempts = attempts + 1
        where ${this.keyIn('id', chosen)}
        returning id`;
    },
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
        's.standardWebhooks',
        capOf('s').as('concurrencyLimit'),
        's.maxPerSecond',
        's.ordering',
        's.signingKey',
        's.legacySigningKey',
        's.legacySigningKeyExpiresAt',
        'e.traceContext',
        's.propagateTraceContext',
      ])
      .where(
        sql<boolean>`d.id in ${
          this.dialect === 'postgres'
            ? sql`(select jsonb_array_elements_text(cast(${ids} as jsonb)))`
            : sql`(select value from json_each(${ids}))`
        }`,
      )
      .where('d.claimedAt', '=', now),
  );

  /**
   * Dead-letters the stale claims of rows whose last attempt was the one interrupted: it counted
   * (it may well have reached the endpoint), and there are `maxAttempts` in all.
   */
  async deadLetterStale(staleBefore: string, maxAttempts: number): Promise<number> {
    const result = await this.db
      .updateTable('webhookDeliveries')
      .set({ status: 'dead_letter', claimedAt: null, nextAttemptAt: null })
      .where('status', '=', IN_FLIGHT)
      .where('claimedAt', '<', staleBefore)
      .where('attempts', '>=', maxAttempts)
      .executeTakeFirst();
    return Number(result.numUpdatedRows);
  }

  /**
   * Settles a batch of attempts in one statement (both backends run UPDATE … FROM a VALUES list);
   * each row only if it still holds the same claim. A null lastResponseStatus (no answer) keeps
   * the last one the endpoint gave.
   */
  async recordOutcomes(outcomes: DeliveryOutcome[]): Promise<void> {
    for (let start = 0; start < outcomes.length; start += OUTCOMES_PER_STATEMENT) {
      const rows = outcomes
        .slice(start, start + OUTCOMES_PER_STATEMENT)
        .map(
          (o) =>
            sql`(${o.id}, ${o.claimedAt}, ${o.status}, cast(${o.lastResponseStatus} as integer), ${o.nextAttemptAt}, ${o.deliveredAt}, cast(${o.lastError} as varchar(30)))`,
        );
      await sql`
        with v (id, claimed_at, status, last_response_status, next_attempt_at, delivered_at, last_error)
          as (values ${sql.join(rows)})
        update webhook_deliveries
        set status = v.status,
            last_response_status = coalesce(v.last_response_status, webhook_deliveries.last_response_status),
            next_attempt_at = v.next_attempt_at,
            delivered_at = v.delivered_at,
            last_error = v.last_error,
            claimed_at = null
        from v
        where webhook_deliveries.id = v.id
          and webhook_deliveries.status = 'in_flight'
          and webhook_deliveries.claimed_at = v.claimed_at`.execute(this.db);
    }
  }

  /**
   * Gives claims back unattempted: each row pending again at its `nextAttemptAt`, its attempt
   * uncounted, if it still holds that claim (see recordOutcomes).
   */
  async releaseClaims(
    released: ReadonlyArray<{ id: string; claimedAt: string; nextAttemptAt: string }>,
  ): Promise<void> {
    for (let start = 0; start < released.length; start += OUTCOMES_PER_STATEMENT) {
      const rows = released
        .slice(start, start + OUTCOMES_PER_STATEMENT)
        .map((r) => sql`(${r.id}, ${r.claimedAt}, ${r.nextAttemptAt})`);
      await sql`
        with v (id, claimed_at, next_attempt_at) as (values ${sql.join(rows)})
        update webhook_deliveries
        set status = 'pending',
            claimed_at = null,
            next_attempt_at = v.next_attempt_at,
            attempts = webhook_deliveries.attempts - 1
        from v
        where webhook_deliveries.id = v.id
          and webhook_deliveries.status = 'in_flight'
          and webhook_deliveries.claimed_at = v.claimed_at`.execute(this.db);
    }
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

  /** Each subscription's deliveries in flight, through the partial in-flight index. */
  inFlightCounts(
    tenantId: string,
    subscriptionIds: string[],
  ): Promise<Array<{ subscriptionId: string; n: number }>> {
    if (subscriptionIds.length === 0) return Promise.resolve([]);
    return this.db
      .selectFrom('webhookDeliveries')
      .select((eb) => ['subscriptionId', eb.fn.countAll<number>().as('n')])
      .where('subscriptionId', 'in', subscriptionIds)
      .where('status', '=', 'in_flight')
      .where('tenantId', '=', tenantId)
      .groupBy('subscriptionId')
      .execute();
  }

  /**
   * What the queue holds (the metrics' gauges): pending rows and the earliest due time, through
   * webhook_deliveries_pending_idx (partial: pending rows only, whatever the history), and paused
   * live subscriptions.
   */
  async queueStats(
    now: string,
    staleBefore: string,
  ): Promise<{
    pending: number;
    oldestDue: string | null;
    stuck: number;
    paused: number;
  }> {
    const queue = await this.db
      .selectFrom('webhookDeliveries')
      .select((eb) => [
        eb.fn.countAll<number>().as('pending'),
        eb.fn
          .min(
            eb
              .case()
              .when('nextAttemptAt', '<=', now)
              .then(eb.ref('nextAttemptAt'))
              .else(null)
              .end(),
          )
          .as('oldestDue'),
      ])
      .where('status', '=', PENDING)
      .executeTakeFirstOrThrow();
    // Through webhook_deliveries_in_flight_idx (partial): in-flight rows only.
    const stuck = await this.db
      .selectFrom('webhookDeliveries')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('status', '=', IN_FLIGHT)
      .where('claimedAt', '<', staleBefore)
      .executeTakeFirstOrThrow();
    const paused = await this.db
      .selectFrom('webhookSubscriptions')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('active', '=', false)
      .where('deletedAt', 'is', null)
      .executeTakeFirstOrThrow();
    return {
      pending: Number(queue.pending),
      oldestDue: (queue.oldestDue as string | null) ?? null,
      stuck: Number(stuck.n),
      paused: Number(paused.n),
    };
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
      .where('status', '=', 'dead_letter')
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
      .where('status', '=', 'dead_letter')
      .where('createdAt', '>=', window.since)
      .where('createdAt', '<', window.until);
    if (window.afterId !== null) query = query.where('id', '>', window.afterId);
    return query.orderBy('id').limit(window.limit).execute();
  }

  /** Records finished HTTP attempts (see WebhookAttemptsTable), in statements of bounded size. */
  async insertAttempts(rows: Insertable<WebhookAttemptsTable>[]): Promise<void> {
    for (let start = 0; start < rows.length; start += ATTEMPTS_PER_STATEMENT) {
      await this.db
        .insertInto('webhookAttempts')
        .values(rows.slice(start, start + ATTEMPTS_PER_STATEMENT))
        .execute();
    }
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

  /**
   * Locks the subscriptions whose counters a batch of outcomes changes (see lockedRows: beside
   * the events' transactions inserting delivery rows under them), in id order so two workers
   * cannot deadlock.
   */
  lockSubscriptions(ids: string[]) {
    return this.lockedRows(
      this.db.selectFrom('webhookSubscriptions').selectAll().where('id', 'in', ids).orderBy('id'),
    ).execute();
  }
}
