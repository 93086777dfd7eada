import { type RawBuilder, sql } from 'kysely';
import type { Dialect } from '../db/database.ts';
import { jsonMembers } from '../db/json-params.ts';
import { WORKER_LOSSES_LIMIT } from '../domain/attempts.ts';
import { EFFECTIVE_CONCURRENCY_LIMIT_SQL, PACE_CLAIM_ROWS_SQL } from '../domain/flow-control.ts';

/**
 * The claim, as one statement over the queue's rows alone (webhook_queue; the history is not
 * written: see migration 0032), compiled once by DeliveryQueue: every list is one JSON parameter,
 * so its text never changes and PostgreSQL plans it once per connection. It takes, for every
 * active subscription not skipped and not held, its earliest due unclaimed rows: at most
 * `rowsPerSubscription`, no more than its concurrency limit less its rows in flight (over every
 * worker, less this worker's settled ones), and for a capped subscription only while its next
 * send slot is within the pace horizon, at most PACE_CLAIM_ROWS_SQL; then at most each tenant's
 * room, the earliest due overall, `limit` in all. Besides those, claims abandoned by their
 * worker (see `abandoned`) short of a crash loop (see WORKER_LOSSES_LIMIT). Each row chosen gets
 * this worker's claim; a pending row's attempt is counted, an abandoned one's is the same attempt
 * sent again (its loss counted instead). On PostgreSQL concurrent workers skip each other's locked
 * rows; SQLite runs the statement under its write lock, so no row is claimed twice either way.
 */
function claimStatement(
  dialect: Dialect,
  p: {
    now: string;
    nowUs: number;
    paceHorizonUs: number;
    workerId: string;
    aliveSince: string;
    staleBefore: string;
    limit: number;
    rowsPerSubscription: number;
    newcomerRoom: number;
    skip: string;
    skipTenants: string;
    rooms: string;
    settled: string;
  },
): RawBuilder<{ deliveryId: string; attempts: number; claimedAt: string }> {
  const pg = dialect === 'postgres';
  const int = (value: number) => (pg ? sql`cast(${value} as integer)` : sql`${value}`);
  const big = (value: number) => (pg ? sql`cast(${value} as bigint)` : sql`${value}`);
  const members = (list: string) => jsonMembers(dialect, list);
  // PostgreSQL's candidates carry where each row lies (see `chosen`).
  const tid = pg ? sql`, tid` : sql``;
  // A `per_object` subscription's row waits while an earlier one of its object is still to go
  // (claimed, or due later with a lower sequence), through webhook_queue_object_idx: only such
  // a subscription's rows carry an object key in the queue.
  const inOrder = (
    row: string,
  ) => sql`(s.ordering = 'none' or ${sql.ref(`${row}.object_key`)} is null or not exists (
    select 1 from webhook_queue o
    where o.subscription_id = ${sql.ref(`${row}.subscription_id`)} and o.object_key = ${sql.ref(`${row}.object_key`)}
      and (o.claimed_at is not null or o.sequence < ${sql.ref(`${row}.sequence`)})))`;
  const eligible = sql`s.active = 1 and (s.held_until is null or s.held_until <= ${p.now})
    and s.id not in ${members(p.skip)} and s.tenant_id not in ${members(p.skipTenants)}`;
  // A subscription's concurrency limit, within the ceiling its owner set.
  const cap = sql.raw(EFFECTIVE_CONCURRENCY_LIMIT_SQL);
  // A capped subscription is claimed for while its next free slot is within the horizon.
  const paceRoom = sql`case when s.max_per_second is null then ${int(p.rowsPerSubscription)}
    when coalesce((select g.next_slot_us from webhook_pacing g where g.subscription_id = s.id), 0)
      > ${big(p.nowUs)} + ${big(p.paceHorizonUs)} then 0
    else ${sql.raw(PACE_CLAIM_ROWS_SQL)} end`;
  // Per subscription: LATERAL on PostgreSQL, its walk limited to its room; on SQLite (no LATERAL,
  // no correlated LIMIT) a correlated IN, with CROSS JOIN keeping subscriptions the outer loop
  // (else SQLite scans every delivery), and the room applied to the rows it found.
  const candidates = pg
    ? sql`
      select q.id, q.tid, q.next_attempt_at, s.tenant_id
      from webhook_subscriptions s
      -- Counted up to the limit: a plain index scan, which marks the entries of claims gone
      -- since (a churning queue leaves many) so that later claims skip them; a bitmap scan
      -- would walk them again until a vacuum.
      cross join lateral (
        select count(*) as n from (
          select 1 from webhook_queue f
          where f.subscription_id = s.id and f.claimed_at is not null
            and f.delivery_id not in ${members(p.settled)}
          limit ${cap}
        ) f
      ) b
      cross join lateral (
        select d.delivery_id as id, d.ctid as tid, d.next_attempt_at from webhook_queue d
        where d.subscription_id = s.id and d.claimed_at is null and d.next_attempt_at <= ${p.now}
          and ${inOrder('d')}
        order by d.next_attempt_at
        limit greatest(0, least(cast(${p.rowsPerSubscription} as integer), ${cap} - b.n, ${paceRoom}))
        for update of d skip locked
      ) q
      where ${eligible}`
    : sql`
      select id, next_attempt_at, tenant_id from (
        select d.delivery_id as id, d.next_attempt_at, s.tenant_id, ${cap} as cap,
          ${paceRoom} as pace,
          row_number() over (partition by s.id order by d.next_attempt_at) as rank,
          coalesce(b.n, 0) as busy
        from webhook_subscriptions s
        cross join webhook_queue d
        left join (
          select subscription_id, count(*) as n from webhook_queue
          where claimed_at is not null and delivery_id not in ${members(p.settled)}
          group by subscription_id
        ) b on b.subscription_id = s.id
        where d.delivery_id in (
          select d2.delivery_id from webhook_queue d2
          where d2.subscription_id = s.id and d2.claimed_at is null and d2.next_attempt_at <= ${p.now}
            and ${inOrder('d2')}
          order by d2.next_attempt_at
          limit ${p.rowsPerSubscription}
        )
        and ${eligible}
      ) as within_room
      where rank + busy <= cap and rank <= pace`;
  // Then at most a tenant's room of its rows (ranked over its subscriptions), the earliest due.
  const roomOf = pg
    ? sql`coalesce(cast(cast(${p.rooms} as jsonb) ->> ranked.tenant_id as integer), cast(${p.newcomerRoom} as integer))`
    : sql`coalesce((select r.value from json_each(${p.rooms}) as r where r.key = ranked.tenant_id), ${p.newcomerRoom})`;
  const due = sql`
    select id${tid} from (
      select id${tid}, next_attempt_at, tenant_id, row_number() over (partition by tenant_id order by next_attempt_at) as rank
      from (${candidates}) as candidates
    ) as ranked
    where rank <= ${roomOf}
    order by next_attempt_at
    limit ${p.limit}`;
  const stale = sql`
    select d.delivery_id as id${pg ? sql`, d.ctid as tid` : sql``} from webhook_queue d
    join webhook_subscriptions s on s.id = d.subscription_id
    where ${abandoned('d', p.aliveSince, p.staleBefore, p.workerId)}
      and d.worker_losses < ${sql.lit(WORKER_LOSSES_LIMIT - 1)} and s.active = 1 and d.subscription_id not in ${members(p.skip)}
    order by d.claimed_at
    limit ${p.limit}
    ${pg ? sql`for update of d skip locked` : sql``}`;
  // The rows chosen, found where they lie on PostgreSQL (a TID scan: the rows are locked, so
  // none moves before the update; a churning queue's statistics never make it a walk), by
  // primary key on SQLite.
  const key = pg ? sql`tid` : sql`id`;
  const chosen = sql`select ${key} from (${due}) as due_rows union all select ${key} from (${stale}) as stale_rows`;
  // DELIVERY_MOVES: a due row's `claim` (no claim yet), an abandoned one's `takeOver`.
  const takenOver = sql`claimed_at is not null`;
  return sql<{ deliveryId: string; attempts: number; claimedAt: string }>`
    update webhook_queue
    set claimed_at = ${p.now}, claimed_by = ${p.workerId},
      attempts = case when ${takenOver} then attempts else attempts + 1 end,
      worker_losses = case when ${takenOver} then worker_losses + 1 else worker_losses end
    where ${pg ? sql`ctid = any(array(${chosen}))` : sql`delivery_id in (${chosen})`}
    returning delivery_id, attempts, claimed_at`;
}

/**
 * Whether the queue row `alias` holds an abandoned claim: its worker's heartbeat is older than
 * `aliveSince` (it died, or stopped without recording it), or, for a claim older than the worker
 * registry (no `claimed_by`), the claim is older than `staleBefore`. Never a claim of `asker`: a
 * worker holds its own claims, whatever the clock says of its heartbeat. Through the partial
 * claims index (there are few such rows); the live workers are read once, not per row.
 */
export function abandoned(alias: string, aliveSince: string, staleBefore: string, asker: string) {
  const row = (column: string) => sql.ref(`${alias}.${column}`);
  return sql<boolean>`${row('claimed_at')} is not null and (
    (${row('claimed_by')} is null and ${row('claimed_at')} < ${staleBefore})
    or (${row('claimed_by')} <> ${asker} and ${row('claimed_by')} not in (
      select w.id from webhook_workers w where w.heartbeat_at >= ${aliveSince})))`;
}

/** The claim's parameters: see claimStatement. */
export type ClaimParameters = [
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
];

/** The claim's statement, its parameters in the order DeliveryQueue.claim passes them. */
export function claimStatementOf(dialect: Dialect, p: ClaimParameters) {
  const [
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
  ] = p;
  return claimStatement(dialect, {
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
  });
}
