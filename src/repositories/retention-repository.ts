import { type RawBuilder, sql } from 'kysely';
import { Repository } from './repository.ts';

/**
 * Retention's deletes (RETENTION_DAYS): operator maintenance over every tenant, like the worker's
 * claims, so no tenant id is taken. Each call is one statement deleting at most `limit` rows
 * walked in index order from a cursor, so a purge is many short statements, never a long lock;
 * on PostgreSQL concurrent purgers (several workers) skip each other's rows.
 */
export class RetentionRepository extends Repository {
  /**
   * Deletes up to `limit` deliveries with an id in (afterId, beforeId) (ids sort by creation
   * time) that no one will send again: delivered, dead-lettered, or pending for a deleted
   * subscription. Their attempts go with them (ON DELETE CASCADE). In-flight rows are left to
   * their worker. Returns the ids deleted, in id order.
   *
   * The status test is a CASE so that no planner picks the status index for it: that index finds
   * every settled row of the table, to be sorted for each batch; the primary key walks the range
   * in order and stops after `limit`.
   */
  async deleteDeliveries(afterId: string, beforeId: string, limit: number): Promise<string[]> {
    const result = await sql<{ id: string }>`
      delete from webhook_deliveries where id ${this.inIds(sql`
        select d.id from webhook_deliveries d
        where d.id > ${afterId} and d.id < ${beforeId}
          and case d.status
            when 'success' then 1
            when 'dead_letter' then 1
            when 'pending' then (
              select count(*) from webhook_subscriptions s
              where s.id = d.subscription_id and s.deleted_at is not null)
            else 0 end = 1
        order by d.id
        limit ${limit}
        ${this.skipLocked('d')}`)}
      returning id`.execute(this.db);
    return result.rows.map((row) => row.id).sort();
  }

  /**
   * The sequence number of the newest event created before `before`, found through
   * events_created_idx: the bound of an events purge (sequence and creation time grow together).
   */
  async lastEventSeqBefore(before: string): Promise<number | null> {
    const result = await sql<{ seq: number | string }>`
      select seq from events where created_at < ${before}
      order by created_at desc limit 1`.execute(this.db);
    const row = result.rows[0];
    return row === undefined ? null : Number(row.seq);
  }

  /**
   * Deletes up to `limit` events with a sequence in (afterSeq, lastSeq], created before `before`,
   * that no delivery refers to any more (webhook_deliveries_event_idx). Returns their sequence
   * numbers, ascending.
   */
  async deleteEvents(
    afterSeq: number,
    lastSeq: number,
    before: string,
    limit: number,
  ): Promise<number[]> {
    const result = await sql<{ seq: number | string }>`
      delete from events where seq ${this.inIds(sql`
        select e.seq from events e
        where e.seq > ${afterSeq} and e.seq <= ${lastSeq} and e.created_at < ${before}
          and not exists (select 1 from webhook_deliveries d where d.event_id = e.id)
        order by e.seq
        limit ${limit}
        ${this.skipLocked('e')}`)}
      returning seq`.execute(this.db);
    return result.rows.map((row) => Number(row.seq)).sort((a, b) => a - b);
  }

  /** Deletes up to `limit` notifications with an id in (afterId, beforeId); their ids, sorted. */
  async deleteNotifications(afterId: string, beforeId: string, limit: number): Promise<string[]> {
    const result = await sql<{ id: string }>`
      delete from notifications where id ${this.inIds(sql`
        select n.id from notifications n
        where n.id > ${afterId} and n.id < ${beforeId}
        order by n.id
        limit ${limit}
        ${this.skipLocked('n')}`)}
      returning id`.execute(this.db);
    return result.rows.map((row) => row.id).sort();
  }

  /**
   * `= any(array(…))` on PostgreSQL: the subquery runs once and the rows are found by key (with
   * IN the planner may pick a join that walks the table); a plain IN on SQLite.
   */
  private inIds(select: RawBuilder<unknown>): RawBuilder<unknown> {
    return this.dialect === 'postgres' ? sql`= any(array(${select}))` : sql`in (${select})`;
  }

  private skipLocked(alias: string): RawBuilder<unknown> {
    return this.dialect === 'postgres' ? sql`for update of ${sql.raw(alias)} skip locked` : sql``;
  }
}
