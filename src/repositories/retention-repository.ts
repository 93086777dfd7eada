import { type RawBuilder, sql } from 'kysely';
import { DELIVERY_STATUS } from '../domain/webhook-moves.ts';
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
   * subscription. Their attempts and queue rows go with them (ON DELETE CASCADE). Claimed rows
   * (in flight) are left to their worker. Returns the ids deleted, in id order.
   *
   * The status test is a CASE so that no planner answers it from an index on the status (such an
   * index finds every matching row of the table, to be sorted for each batch); the primary key
   * walks the range in order and stops after `limit`.
   */
  async deleteDeliveries(afterId: string, beforeId: string, limit: number): Promise<string[]> {
    const ids = await this.deleteFirst(
      'webhook_deliveries',
      'id',
      sql`t.id > ${afterId} and t.id < ${beforeId}
        and case t.status
          when ${sql.lit(DELIVERY_STATUS.success)} then 1
          when ${sql.lit(DELIVERY_STATUS.deadLetter)} then 1
          when ${sql.lit(DELIVERY_STATUS.pending)} then (
            select count(*) from webhook_subscriptions s
            where s.id = t.subscription_id and s.deleted_at is not null
              and not exists (select 1 from webhook_queue q
                where q.delivery_id = t.id and q.claimed_at is not null))
          else 0 end = 1`,
      limit,
    );
    return ids.map(String).sort();
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
    const seqs = await this.deleteFirst(
      'events',
      'seq',
      sql`t.seq > ${afterSeq} and t.seq <= ${lastSeq} and t.created_at < ${before}
        and not exists (select 1 from webhook_deliveries d where d.event_id = t.id)
        and not exists (select 1 from webhook_missed_events m where m.event_id = t.id)`,
      limit,
    );
    return seqs.map(Number).sort((a, b) => a - b);
  }

  /**
   * Deletes the missed-event rows of events created before `before` (recover with `missed` no
   * longer reaches them), so that those events can go. Few rows: one statement.
   */
  async deleteMissedBefore(before: string): Promise<void> {
    await this.db.deleteFrom('webhookMissedEvents').where('eventCreatedAt', '<', before).execute();
  }

  /** Deletes up to `limit` notifications with an id in (afterId, beforeId); their ids, sorted. */
  async deleteNotifications(afterId: string, beforeId: string, limit: number): Promise<string[]> {
    const ids = await this.deleteFirst(
      'notifications',
      'id',
      sql`t.id > ${afterId} and t.id < ${beforeId}`,
      limit,
    );
    return ids.map(String).sort();
  }

  /**
   * One statement: deletes the first `limit` rows of `table` (aliased `t` in `where`) by `key`
   * that `where` selects, and returns their keys (in no particular order).
   */
  private async deleteFirst(
    table: 'webhook_deliveries' | 'events' | 'notifications',
    key: 'id' | 'seq',
    where: RawBuilder<unknown>,
    limit: number,
  ): Promise<Array<string | number>> {
    const result = await sql<Record<string, string | number>>`
      delete from ${sql.raw(table)} where ${this.keyIn(
        key,
        sql`select t.${sql.raw(key)} from ${sql.raw(table)} t where ${where}
          order by t.${sql.raw(key)} limit ${limit} ${this.skipLocked('t')}`,
      )}
      returning ${sql.raw(key)}`.execute(this.db);
    return result.rows.map((row) => row[key]);
  }
}
