import { paceIntervalUs, paceSlots } from './admission.ts';
import type { DeliveryQueue } from './queue.ts';
import type { ClaimedDelivery } from './types.ts';

/**
 * Reserves the send slots of a claim's rows of capped subscriptions, all in one statement, so they
 * interleave with every other worker's on one schedule per subscription. Returns each row's slot
 * (epoch ms; rows of uncapped subscriptions have none) and, per subscription, when its schedule
 * now ends (epoch ms).
 */
export async function reserveSlots(
  queue: DeliveryQueue,
  claimed: readonly ClaimedDelivery[],
  nowMs: number,
): Promise<{ slots: Map<string, number>; scheduleEndsMs: number[] }> {
  const slots = new Map<string, number>();
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
  const next = await queue.reservePace(
    nowMs * 1000,
    [...bySubscription].map(([subscriptionId, rows]) => ({
      subscriptionId,
      spanUs: rows.length * paceIntervalUs(rate(rows)),
    })),
  );
  const scheduleEndsMs: number[] = [];
  for (const [id, rows] of bySubscription) {
    const nextSlotUs = next.get(id) as number;
    const times = paceSlots(nextSlotUs, rows.length, rate(rows));
    for (const [i, row] of rows.entries()) slots.set(row.id, times[i]);
    scheduleEndsMs.push(nextSlotUs / 1000);
  }
  return { slots, scheduleEndsMs };
}
