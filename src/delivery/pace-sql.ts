import { type Kysely, type RawBuilder, sql } from 'kysely';
import type { DB } from '../db/schema.ts';

/* Each capped subscription's schedule in webhook_pacing: its next free send slot and the margin
   its slots are spaced at, with the statements that reserve slots and widen margins. */

/**
 * How late past its slot a paced attempt may still start beside other workers: the subscription's
 * margin, from PACE_LATE_MS up to PACE_LATE_MAX_MS. Slots are `(1 s + margin) / maxPerSecond`
 * apart, so any `maxPerSecond + 1` starts span more than a second even when the first of them
 * started that late; one later still is given back (see paceTurn) and raises the margin of the
 * slots reserved after it (to twice its lateness), so a lagging event loop costs some of the rate,
 * not every slot. A margin halves again once nothing has raised it for PACE_LATE_DECAY_MS, the
 * next slot moved on by the difference (the slots before it were spaced for the wider margin).
 */
export const PACE_LATE_MS = 20;
export const PACE_LATE_MAX_MS = 500;
export const PACE_LATE_DECAY_MS = 60_000;

const BASE_US = PACE_LATE_MS * 1000;
const DECAY_US = PACE_LATE_DECAY_MS * 1000;

/** A claim's capped rows of one subscription, to reserve slots for. */
export interface PaceReservation {
  subscriptionId: string;
  rows: number;
  perSecond: number;
}

/** Every subscription of the reservation gets a schedule row (a new one at the base margin). */
function paceRowsStatement(reservations: readonly PaceReservation[]): RawBuilder<unknown> {
  const rows = reservations.map((r) => sql`(${r.subscriptionId}, cast(0 as bigint))`);
  return sql`insert into webhook_pacing (subscription_id, next_slot_us) values ${sql.join(rows)}
    on conflict (subscription_id) do nothing`;
}

/**
 * Reserves the slots, all subscriptions in one statement (in id order: concurrent reservations
 * lock rows in one order). Each schedule's margin first halves if nothing raised it for
 * PACE_LATE_DECAY_MS, the difference left as a gap; then its next free slot moves to the later of
 * itself and `nowUs`, plus that gap and `rows` intervals at the margin. Returns each one's next
 * free slot after the reservation and the margin its slots were spaced at (µs).
 */
function reservePaceStatement(
  nowUs: number,
  reservations: readonly PaceReservation[],
): RawBuilder<{ id: string; next: number | string; margin: number | string }> {
  const now = sql`cast(${nowUs} as bigint)`;
  const values = [...reservations]
    .sort((a, b) => (a.subscriptionId < b.subscriptionId ? -1 : 1))
    .map(
      (r) => sql`(${r.subscriptionId}, cast(${r.rows} as bigint), cast(${r.perSecond} as bigint))`,
    );
  const margin = sql`(case when margin_us > ${BASE_US} and raised_at_us < ${now} - ${DECAY_US}
    then (case when margin_us / 2 > ${BASE_US} then margin_us / 2 else ${BASE_US} end)
    else margin_us end)`;
  return sql`with v (id, n, per_second) as (values ${sql.join(values)})
    update webhook_pacing
    set margin_us = ${margin},
        next_slot_us = (case when next_slot_us > ${now} then next_slot_us else ${now} end)
          + (margin_us - ${margin})
          + v.n * ((1000000 + ${margin} + v.per_second - 1) / v.per_second)
    from v
    where webhook_pacing.subscription_id = v.id
    returning webhook_pacing.subscription_id as id, webhook_pacing.next_slot_us as next,
      webhook_pacing.margin_us as margin`;
}

/** Raises the subscription's margin to `marginUs` unless it is wider already (see PACE_LATE_MS). */
function raiseMarginStatement(
  subscriptionId: string,
  marginUs: number,
  nowUs: number,
): RawBuilder<unknown> {
  const margin = sql`cast(${marginUs} as bigint)`;
  return sql`update webhook_pacing
    set margin_us = case when margin_us < ${margin} then ${margin} else margin_us end,
        raised_at_us = cast(${nowUs} as bigint)
    where subscription_id = ${subscriptionId}`;
}

/**
 * Reserves send slots of capped subscriptions (see reservePaceStatement): each one's next free
 * slot after the reservation and the margin its slots are spaced at (µs). One statement once a
 * subscription has its schedule row; the first reservation makes the row, then reserves. On
 * PostgreSQL the row lock orders concurrent reservations, SQLite's write lock does the same.
 */
export async function reservePace(
  db: Kysely<DB>,
  nowUs: number,
  reservations: readonly PaceReservation[],
): Promise<Map<string, { nextSlotUs: number; marginUs: number }>> {
  const reserved = new Map<string, { nextSlotUs: number; marginUs: number }>();
  const reserve = async (these: readonly PaceReservation[]) => {
    const { rows } = await reservePaceStatement(Math.round(nowUs), these).execute(db);
    for (const row of rows) {
      reserved.set(row.id, { nextSlotUs: Number(row.next), marginUs: Number(row.margin) });
    }
  };
  if (reservations.length === 0) return reserved;
  await reserve(reservations);
  const unscheduled = reservations.filter((r) => !reserved.has(r.subscriptionId));
  if (unscheduled.length > 0) {
    await paceRowsStatement(unscheduled).execute(db);
    await reserve(unscheduled);
  }
  return reserved;
}

/** A start came later than its margin: the subscription's next slots get a wider one. */
export async function raisePaceMargin(
  db: Kysely<DB>,
  subscriptionId: string,
  marginUs: number,
  nowUs: number,
): Promise<void> {
  await raiseMarginStatement(subscriptionId, marginUs, Math.round(nowUs)).execute(db);
}
