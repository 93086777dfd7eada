import { type Kysely, sql } from 'kysely';
import type { Dialect } from '../database.ts';

/**
 * The queue apart from the history. What a worker claims, gives back and settles lives in
 * `webhook_queue`, one narrow row per delivery still to be sent (its due time, its claim, its
 * attempt count while it is live) with only the indexes a claim walks; `webhook_deliveries` is
 * the history, written when a reader can see something happen (created, an attempt's outcome),
 * never on a claim. The history loses the indexes on its status (so settling it is, on
 * PostgreSQL, an update in place), and the per-object index moves to the queue, holding only the
 * rows of `per_object` subscriptions.
 *
 * The previous release still runs on this schema during a rolled upgrade, claiming and settling
 * the history's `status`. Triggers keep the queue in step with what it writes: a pending row
 * inserted by any code gets its queue row (the current code relies on that too); the previous
 * release's claim takes the queue row only while no one else holds it (else its update of that
 * row is skipped: no delivery is sent by both releases at once); its settlements and give-backs
 * move or remove the queue row they held. Its claims walk the history without the dropped
 * indexes until its last worker is gone. A later release drops the triggers that follow its
 * `in_flight` (the one that enqueues stays, and on SQLite the one that moves a queue row with
 * this release's outcome: SQLite has no writes in a WITH to do it in the outcome's statement).
 *
 * Pending and in-flight rows are copied into the queue here, in-flight ones with their claim, so
 * a claim whose worker died before the upgrade is taken over as it would have been.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const pg = dialect === 'postgres';
  await sql`create table webhook_queue (
    delivery_id varchar(40) primary key references webhook_deliveries (id) on delete cascade,
    subscription_id varchar(40) not null,
    next_attempt_at varchar(30) not null,
    attempts integer not null default 0,
    worker_losses integer not null default 0,
    claimed_at varchar(30),
    claimed_by varchar(40),
    sequence bigint,
    object_key varchar(64)
  )`.execute(db);
  // Due rows by subscription and due time (a claim's walk); claims by subscription (the
  // in-flight counts, the abandoned claims); a `per_object` subscription's unfinished rows by
  // object (whether an earlier one of its object is still to go).
  await sql`create index webhook_queue_due_idx on webhook_queue (subscription_id, next_attempt_at)
    where claimed_at is null`.execute(db);
  await sql`create index webhook_queue_claimed_idx on webhook_queue (subscription_id, claimed_at)
    where claimed_at is not null`.execute(db);
  await sql`create index webhook_queue_object_idx on webhook_queue (subscription_id, object_key, sequence)
    where object_key is not null`.execute(db);

  const perObject = (column: string) =>
    sql`case when s.ordering = 'per_object' then ${sql.ref(column)} end`;
  await sql`insert into webhook_queue
      (delivery_id, subscription_id, next_attempt_at, attempts, worker_losses, claimed_at,
       claimed_by, sequence, object_key)
    select d.id, d.subscription_id, coalesce(d.next_attempt_at, d.created_at), d.attempts,
      d.worker_losses, case when d.status = 'in_flight' then d.claimed_at end,
      case when d.status = 'in_flight' then d.claimed_by end,
      ${perObject('d.sequence')}, ${perObject('d.object_key')}
    from webhook_deliveries d
    join webhook_subscriptions s on s.id = d.subscription_id
    where d.status in ('pending', 'in_flight')`.execute(db);

  for (const index of ['pending', 'in_flight', 'object']) {
    await db.schema.dropIndex(`webhook_deliveries_${index}_idx`).execute();
  }
  if (pg) {
    // Each row is written twice (created, then its attempt's outcome): half of each page is
    // left for the second version, so that an outcome stays on its row's page with no entry in
    // any index (a HOT update), now that no index holds a column it writes.
    await sql`alter table webhook_deliveries set (fillfactor = 50)`.execute(db);
    await postgresTriggers(db);
  } else await sqliteTriggers(db);
}

/** What a queue row takes from a delivery row `row` of subscription `s` (see the enqueue trigger). */
const ENQUEUED_COLUMNS = `(delivery_id, subscription_id, next_attempt_at, attempts, sequence, object_key)`;
const enqueued = (row: string) => `${row}.id, ${row}.subscription_id,
  coalesce(${row}.next_attempt_at, ${row}.created_at), ${row}.attempts,
  case when s.ordering = 'per_object' then ${row}.sequence end,
  case when s.ordering = 'per_object' then ${row}.object_key end`;

async function postgresTriggers(db: Kysely<unknown>): Promise<void> {
  // One insert a statement, from the statement's new rows.
  await sql`create function webhook_queue_enqueue() returns trigger language plpgsql as $$
    begin
      insert into webhook_queue ${sql.raw(ENQUEUED_COLUMNS)}
      select ${sql.raw(enqueued('a'))}
      from added a join webhook_subscriptions s on s.id = a.subscription_id
      where a.status = 'pending';
      return null;
    end $$`.execute(db);
  await sql`create trigger webhook_queue_enqueue after insert on webhook_deliveries
    referencing new table as added for each statement
    execute function webhook_queue_enqueue()`.execute(db);
  // The previous release's claim or take-over of a row: only while its queue row is free (a
  // pending row's) or still held by the claim it takes over; else this row is left out.
  await sql`create function webhook_queue_follow_claim() returns trigger language plpgsql as $$
    begin
      update webhook_queue
      set claimed_at = new.claimed_at, claimed_by = new.claimed_by, attempts = new.attempts,
        worker_losses = new.worker_losses
      where delivery_id = new.id and claimed_at is not distinct from
        (case when old.status = 'in_flight' then old.claimed_at end);
      if not found then return null; end if;
      return new;
    end $$`.execute(db);
  await sql`create trigger webhook_queue_follow_claim before update on webhook_deliveries
    for each row when (new.status = 'in_flight' and new.claimed_at is distinct from old.claimed_at)
    execute function webhook_queue_follow_claim()`.execute(db);
  // Its settlement or give-back of a claim the queue row still holds.
  await sql`create function webhook_queue_follow_settle() returns trigger language plpgsql as $$
    begin
      if new.status = 'pending' then
        update webhook_queue
        set claimed_at = null, claimed_by = null, attempts = new.attempts,
          worker_losses = new.worker_losses,
          next_attempt_at = coalesce(new.next_attempt_at, new.created_at)
        where delivery_id = new.id and claimed_at = old.claimed_at;
      else
        delete from webhook_queue where delivery_id = new.id and claimed_at = old.claimed_at;
      end if;
      return null;
    end $$`.execute(db);
  await sql`create trigger webhook_queue_follow_settle after update on webhook_deliveries
    for each row when (old.status = 'in_flight' and new.status <> 'in_flight')
    execute function webhook_queue_follow_settle()`.execute(db);
}

async function sqliteTriggers(db: Kysely<unknown>): Promise<void> {
  await sql`create trigger webhook_queue_enqueue after insert on webhook_deliveries
    when new.status = 'pending'
    begin
      insert into webhook_queue ${sql.raw(ENQUEUED_COLUMNS)}
      select ${sql.raw(enqueued('new'))}
      from webhook_subscriptions s where s.id = new.subscription_id;
    end`.execute(db);
  // This release's outcome on SQLite: the history's update names the claim it settles
  // (`claimed_at`), and the queue row that still holds that claim follows in the same
  // statement: due again on a retry, removed otherwise.
  await sql`create trigger webhook_queue_settle after update of status, next_attempt_at on webhook_deliveries
    when new.claimed_at is not null and new.status <> 'in_flight'
    begin
      delete from webhook_queue
      where delivery_id = new.id and claimed_at = new.claimed_at and new.status <> 'pending';
      update webhook_queue
      set claimed_at = null, claimed_by = null, next_attempt_at = new.next_attempt_at, worker_losses = 0
      where delivery_id = new.id and claimed_at = new.claimed_at and new.status = 'pending';
    end`.execute(db);
  // RAISE(IGNORE) in a BEFORE trigger leaves this row's update out, and the statement goes on.
  await sql`create trigger webhook_queue_follow_claim before update on webhook_deliveries
    when new.status = 'in_flight' and new.claimed_at is not old.claimed_at
    begin
      select raise(ignore) where not exists (
        select 1 from webhook_queue where delivery_id = new.id and claimed_at is
          (case when old.status = 'in_flight' then old.claimed_at end));
      update webhook_queue
      set claimed_at = new.claimed_at, claimed_by = new.claimed_by, attempts = new.attempts,
        worker_losses = new.worker_losses
      where delivery_id = new.id;
    end`.execute(db);
  await sql`create trigger webhook_queue_follow_settle after update on webhook_deliveries
    when old.status = 'in_flight' and new.status <> 'in_flight'
    begin
      update webhook_queue
      set claimed_at = null, claimed_by = null, attempts = new.attempts,
        worker_losses = new.worker_losses,
        next_attempt_at = coalesce(new.next_attempt_at, new.created_at)
      where delivery_id = new.id and claimed_at = old.claimed_at and new.status = 'pending';
      delete from webhook_queue
      where delivery_id = new.id and claimed_at = old.claimed_at and new.status <> 'pending';
    end`.execute(db);
}
