import type { Logger } from 'pino';
import { PACE_HORIZON_MS } from '../domain/flow-control.ts';
import { paceSlots, paceTurn, RecentStarts, raisedMarginUs } from './admission.ts';
import type { DeliveryQueue } from './queue.ts';
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
      queue: DeliveryQueue;
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
        this.deps.queue,
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
      this.deps.queue
        .raisePaceMargin(id, margin, nowMs * 1000)
        .catch((error) => this.deps.logger.warn({ err: error }, 'widening a pace margin failed'));
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
  queue: DeliveryQueue,
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
  const reserved = await queue.reservePace(
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
