import { type Kysely, type RawBuilder, sql } from 'kysely';
import type { DB } from '../../src/db/schema.ts';
import { firstIdAt } from '../../src/lib/ids.ts';

/**
 * Bulk rows for retention, written by the database itself (a recursive series, the same SQL on
 * both backends): hundreds of thousands in seconds. Ids are minted as the service mints them,
 * creation time first, so they sort (and are purged) by time; `group` keeps sets apart.
 * Used by the retention suite and the retention benchmark.
 */
export class RetentionSeed {
  constructor(private readonly tenantId: string) {}

  /** Events `evt-<tag>-1` … `evt-<tag>-<n>`, created at `ms`. */
  events(tag: string, n: number, ms: number): RawBuilder<unknown> {
    return sql`${series(n)}
      insert into events (id, tenant_id, type, data, is_test, created_at)
      select 'evt-' || ${text(tag)} || '-' || cast(i as text), ${text(this.tenantId)},
        'client.created', '{}', 0, ${text(iso(ms))} from n`;
  }

  /**
   * `n` deliveries created at `ms`, one per subscription in turn, of events `evt-<tag>-k` (one
   * event per round over the subscriptions), with the status `status(i)` gives row i.
   */
  deliveries(
    group: number,
    tag: string,
    n: number,
    ms: number,
    status: (i: RawBuilder<unknown>) => RawBuilder<unknown>,
    subscriptions: string[],
    /** The first row's i (a large set is seeded in several statements). */
    from = 1,
  ): RawBuilder<unknown> {
    // Inlined (sql.lit): better-sqlite3 binds a JS number as REAL, and `/` would not divide
    // integers.
    const count = sql.lit(subscriptions.length);
    const subscription = sql.join(
      subscriptions.map((id, k) => sql`when ${sql.lit(k)} then ${text(id)}`),
      sql` `,
    );
    return sql`${series(n, from)}
      insert into webhook_deliveries (id, tenant_id, subscription_id, event_id, event_type, status, attempts, created_at)
      select ${idAt('dlv', ms, group)}, ${text(this.tenantId)}, case (i % ${count}) ${subscription} end,
        'evt-' || ${text(tag)} || '-' || cast(((i - 1) / ${count}) + 1 as text),
        'client.created', ${status(sql`i`)}, 1, ${text(iso(ms))} from n`;
  }

  /** One failed attempt for each of the first `n` deliveries of `deliveryGroup`. */
  attempts(group: number, deliveryGroup: number, n: number, ms: number): RawBuilder<unknown> {
    return sql`${series(n)}
      insert into webhook_attempts (id, tenant_id, delivery_id, attempt, started_at, duration_ms, status, response_body)
      select ${idAt('att', ms, group)}, ${text(this.tenantId)}, ${idAt('dlv', ms, deliveryGroup)}, 1,
        ${text(iso(ms))}, 12, 500, 'no' from n`;
  }

  notifications(group: number, n: number, ms: number): RawBuilder<unknown> {
    return sql`${series(n)}
      insert into notifications (id, tenant_id, recipient, kind, created_at)
      select ${idAt('ntf', ms, group)}, ${text(this.tenantId)}, 'owner@example.test',
        'webhook_paused', ${text(iso(ms))} from n`;
  }

  /**
   * A tenant's history past retention at `ms`: `deliveries` settled deliveries (a quarter dead
   * letters, each with an attempt) of deliveries/4 events over four subscriptions, and a thousand
   * events no one subscribed to.
   */
  pastRetention(ms: number, deliveries: number, subscriptions: string[]): RawBuilder<unknown>[] {
    // In statements of at most 50,000 rows: 200,000 deliveries in one, each checked against
    // three foreign keys, outlasted the pool's 5 s statement_timeout on a slow host.
    const chunks: RawBuilder<unknown>[] = [];
    for (let from = 1; from <= deliveries; from += SEED_CHUNK) {
      chunks.push(
        this.deliveries(
          1,
          'old',
          Math.min(SEED_CHUNK, deliveries - from + 1),
          ms,
          (i) => sql`case when ${i} % 4 = 3 then 'dead_letter' else 'success' end`,
          subscriptions,
          from,
        ),
      );
    }
    return [
      this.events('old', deliveries / subscriptions.length, ms),
      ...chunks,
      this.attempts(1, 1, deliveries / 4, ms),
      this.events('orphan', 1_000, ms),
    ];
  }
}

const SEED_CHUNK = 50_000;

/** Runs seed statements in order. */
export async function runSeed(db: Kysely<DB>, statements: RawBuilder<unknown>[]): Promise<void> {
  for (const statement of statements) await statement.execute(db);
}

export const iso = (ms: number) => new Date(ms).toISOString();
export const text = (value: string) => sql`cast(${value} as varchar(40))`;
/** `n(i)`: the integers from `from`, `n` of them (a recursive series, the same SQL on both backends). */
export const series = (n: number, from = 1) =>
  sql`with recursive n(i) as (select ${sql.lit(from)} union all select i + 1 from n where i < ${sql.lit(from + n - 1)})`;
/** Ids minted at `ms`, as the service mints them (time first), one per `i`, kept apart by `group`. */
export const idAt = (prefix: 'dlv' | 'att' | 'ntf', ms: number, group: number) =>
  sql`cast(${firstIdAt(prefix, ms).slice(0, 14)} || ${String(group).padStart(9, '0')} || cast(i + 1000000 as text) as varchar(40))`;
