import type { Logger } from 'pino';
import type { Database } from '../db/database.ts';
import { PACE_HORIZON_MS } from '../domain/flow-control.ts';
import { PACE_LATE_MAX_MS, PACE_LATE_MS, raisePaceMargin, reservePace } from './pace-sql.ts';
import type { WorkerRegistry } from './registry.ts';
import type { ClaimedDelivery } from './types.ts';
import type { Wakes } from './wakes.ts';

/**
 * How far ahead a burst's first send slot lies: the reservation's own round trip must not make it
 * late (see paceTurn).
 */
const PACE_LEAD_MS = 25;

/** A paced attempt's send slot (epoch ms) and how late it may start beside other workers. */
export interface PaceSlot {
  atMs: number;
  marginMs: number;
}

/**
 * A worker's pace of its capped subscriptions: reserves their send slots as rows are claimed, and
 * says when each attempt may start (see paceTurn), from the starts it made.
 */
export class Pacer {
  private readonly recent = new RecentStarts();

  constructor(
    private readonly deps: {
      database: Pick<Database, 'db'>;
      logger: Logger;
      registry: Pick<WorkerRegistry, 'aloneAt' | 'pacedFromMs'>;
      wakes: Pick<Wakes, 'at'>;
    },
  ) {}

  /**
   * How far ahead a capped subscription's next slot may lie for a claim at `nowMs` to take its
   * rows (µs), or null for none: before this worker's first paced start may be.
   */
  horizonUs(nowMs: number): number | null {
    return nowMs < this.deps.registry.pacedFromMs ? null : PACE_HORIZON_MS * 1000;
  }

  /**
   * Send slots (epoch ms) for the claimed rows of capped subscriptions, the first of them
   * PACE_LEAD_MS after `nowMs`; null for each when the reservation failed (they are given back).
   * The worker wakes to claim again as the reserved slots run out.
   */
  async reserve(
    claimed: readonly ClaimedDelivery[],
    nowMs: number,
  ): Promise<Map<string, PaceSlot | null>> {
    try {
      const { slots, scheduleEndsMs } = await reserveSlots(
        this.deps.database,
        claimed,
        nowMs + PACE_LEAD_MS,
      );
      for (const endMs of scheduleEndsMs) this.deps.wakes.at(endMs - PACE_HORIZON_MS);
      return slots;
    } catch (error) {
      this.deps.logger.warn({ err: error }, 'reserving send slots failed; giving the rows back');
      const capped = claimed.filter((row) => row.maxPerSecond !== null);
      return new Map(capped.map((row) => [row.id, null]));
    }
  }

  /**
   * Whether the attempt of a capped subscription with `slot` may start at `nowMs` (see paceTurn);
   * a `go` is counted as a start, a `late` widens the subscription's margin.
   */
  turn(delivery: ClaimedDelivery, slot: PaceSlot, nowMs: number): 'go' | 'late' | number {
    const perSecond = delivery.maxPerSecond as number;
    const id = delivery.subscriptionId;
    const alone = this.deps.registry.aloneAt(nowMs);
    const turn = paceTurn(slot, nowMs, this.recent.of(id, nowMs), perSecond, alone);
    if (turn === 'go') this.recent.add(id, nowMs, perSecond);
    if (turn === 'late') {
      const margin = raisedMarginUs(nowMs - slot.atMs);
      raisePaceMargin(this.deps.database.db, id, margin, nowMs * 1000).catch((error) =>
        this.deps.logger.warn({ err: error }, 'widening a pace margin failed'),
      );
    }
    return turn;
  }
}

/**
 * Reserves the send slots of a claim's rows of capped subscriptions, all in one statement, so they
 * interleave with every other worker's on one schedule per subscription. Returns each row's slot
 * (epoch ms; rows of uncapped subscriptions have none) and, per subscription, when its schedule
 * now ends (epoch ms).
 */
async function reserveSlots(
  database: Pick<Database, 'db'>,
  claimed: readonly ClaimedDelivery[],
  nowMs: number,
): Promise<{ slots: Map<string, PaceSlot>; scheduleEndsMs: number[] }> {
  const slots = new Map<string, PaceSlot>();
  const bySubscription = new Map<string, ClaimedDelivery[]>();
  for (const delivery of claimed) {
    if (delivery.maxPerSecond === null) continue;
    const rows = bySubscription.get(delivery.subscriptionId) ?? [];
    rows.push(delivery);
    bySubscription.set(delivery.subscriptionId, rows);
  }
  if (bySubscription.size === 0) return { slots, scheduleEndsMs: [] };
  // One claim reads one maxPerSecond per subscription.
  const rate = (rows: ClaimedDelivery[]) => rows[0].maxPerSecond as number;
  const reserved = await reservePace(
    database.db,
    nowMs * 1000,
    [...bySubscription].map(([subscriptionId, rows]) => ({
      subscriptionId,
      rows: rows.length,
      perSecond: rate(rows),
    })),
  );
  const scheduleEndsMs: number[] = [];
  for (const [id, rows] of bySubscription) {
    const { nextSlotUs, marginUs } = reserved.get(id) as { nextSlotUs: number; marginUs: number };
    const times = paceSlots(nextSlotUs, rows.length, rate(rows), marginUs);
    for (const [i, row] of rows.entries()) {
      slots.set(row.id, { atMs: times[i], marginMs: marginUs / 1000 });
    }
    scheduleEndsMs.push(nextSlotUs / 1000);
  }
  return { slots, scheduleEndsMs };
}

/** Microseconds between two sends to a subscription capped at `perSecond`, at `marginUs`. */
export function paceIntervalUs(perSecond: number, marginUs = PACE_LATE_MS * 1000): number {
  return Math.ceil((1_000_000 + marginUs) / perSecond);
}

/**
 * The send slots (epoch ms) of `count` attempts whose reservation moved the subscription's next
 * free slot to `nextSlotUs` at `marginUs`: the `count` slots just before it, evenly spaced.
 */
export function paceSlots(
  nextSlotUs: number,
  count: number,
  perSecond: number,
  marginUs = PACE_LATE_MS * 1000,
): number[] {
  const interval = paceIntervalUs(perSecond, marginUs);
  const first = nextSlotUs - count * interval;
  return Array.from({ length: count }, (_, i) => (first + i * interval) / 1000);
}

/** The margin a start `lateMs` past its slot asks for (see PACE_LATE_MS), in microseconds. */
export function raisedMarginUs(lateMs: number): number {
  return Math.round(Math.min(PACE_LATE_MAX_MS, 2 * lateMs) * 1000);
}

/**
 * Whether an attempt of a subscription capped at `perSecond` may start at `nowMs`: `go`, the time
 * to wait for (epoch ms), or `late` (it is given back and takes a new slot later). It waits for its
 * slot, and for the rule itself: `recent` holds this worker's own starts of the subscription in the
 * last second, oldest first, and the `perSecond`-th last of them must be a second behind. Alone,
 * this worker makes every start, so it goes however late (a lagging event loop must not stop the
 * sends). Beside other workers, whose starts it cannot see, it goes only within its slot's margin
 * (`marginMs`, see PACE_LATE_MS): then any `perSecond + 1` starts span a second by the slots'
 * spacing alone.
 */
export function paceTurn(
  slot: { atMs: number; marginMs: number },
  nowMs: number,
  recent: readonly number[],
  perSecond: number,
  alone: boolean,
): 'go' | 'late' | number {
  if (nowMs < slot.atMs) return slot.atMs;
  if (!alone && nowMs - slot.atMs > slot.marginMs) return 'late';
  if (recent.length >= perSecond) {
    const due = recent[recent.length - perSecond] + 1000;
    if (nowMs < due) return due;
  }
  return 'go';
}

/**
 * This worker's starts of each capped subscription within the last second: what paceTurn reads.
 * Kept exactly (never cleared to bound it): starts older than a second are dropped as entries are
 * read, and every entry once the map grows past the subscriptions one second could have started.
 * Each entry is kept in start order, pruned in place.
 */
export class RecentStarts {
  private readonly starts = new Map<string, number[]>();
  private sweepAbove = 1_000;

  /** The subscription's starts within the second before `nowMs`, oldest first. */
  of(subscriptionId: string, nowMs: number): readonly number[] {
    const starts = this.starts.get(subscriptionId);
    if (starts === undefined) return [];
    const kept = starts.findIndex((at) => nowMs - at < 1000);
    if (kept === -1) {
      this.starts.delete(subscriptionId);
      return [];
    }
    if (kept > 0) starts.splice(0, kept);
    return starts;
  }

  /**
   * A start at `nowMs`; only the last `perSecond` can matter to the next (older ones are dropped
   * at the next read).
   */
  add(subscriptionId: string, nowMs: number, perSecond: number): void {
    const starts = this.starts.get(subscriptionId);
    if (starts === undefined) this.starts.set(subscriptionId, [nowMs]);
    else {
      starts.push(nowMs);
      if (starts.length > perSecond) starts.splice(0, starts.length - perSecond);
    }
    if (this.starts.size > this.sweepAbove) {
      for (const id of [...this.starts.keys()]) this.of(id, nowMs);
      this.sweepAbove = Math.max(1_000, this.starts.size * 2);
    }
  }
}
