import { BoundedMap } from '../lib/bounded-map.ts';

/**
 * Admission: which claimed rows a worker may take and when each may start, as pure functions and
 * plain state. Fair shares of the worker's slots per tenant and per subscription, the holds
 * receivers ask for, and the pace of a capped subscription. The loop asks; nothing here waits.
 */

/**
 * Most rows one claim takes of a subscription: half its cap, so a claim never takes one past the
 * cap while it still holds up to the other half.
 */
export function subscriptionClaimShare(maxPerSubscription: number): number {
  return Math.ceil(maxPerSubscription / 2);
}

/**
 * How many of a worker's attempt slots one tenant may hold: an equal share among the tenants
 * holding slots now plus one more, so there is always room for a tenant that has none yet, but
 * never less than one subscription's cap. Alone, a tenant gets half the slots: a tenant whose
 * endpoints all hang leaves the other half to everyone else, and one with two subscriptions at
 * the full per-subscription cap still runs at full speed.
 */
export function tenantSlotCap(
  maxRunning: number,
  maxPerSubscription: number,
  otherTenantsRunning: number,
): number {
  return Math.max(maxPerSubscription, Math.floor(maxRunning / (otherTenantsRunning + 2)));
}

export interface TenantClaimPlan {
  /** Rows a claim may take of each tenant with attempts running (its cap less those). */
  room: Map<string, number>;
  /** Tenants at or past their cap: left out of the claim. */
  skip: string[];
  /** Rows a claim may take of a tenant with nothing running. */
  newcomerRoom: number;
}

/** What a claim may take of each tenant, given the attempts each has running. */
export function tenantClaimPlan(
  runningByTenant: ReadonlyMap<string, number>,
  maxRunning: number,
  maxPerSubscription: number,
): TenantClaimPlan {
  const holders = runningByTenant.size;
  const cap = tenantSlotCap(maxRunning, maxPerSubscription, holders - 1);
  const room = new Map<string, number>();
  const skip: string[] = [];
  for (const [tenant, count] of runningByTenant) {
    if (count >= cap) skip.push(tenant);
    else room.set(tenant, cap - count);
  }
  return {
    room,
    skip,
    newcomerRoom: tenantSlotCap(maxRunning, maxPerSubscription, holders),
  };
}

/**
 * Whether an attempt that just ended (the tenant now has `left` running) should wake the claim
 * loop for that tenant: once it has a quarter of its cap free again after being held back, not
 * after every single attempt (a claim per attempt would load the database for nothing).
 */
export function tenantReopened(
  left: number,
  otherTenantsRunning: number,
  maxRunning: number,
  maxPerSubscription: number,
): boolean {
  return left === reopenLevel(maxRunning, maxPerSubscription, otherTenantsRunning);
}

/**
 * Whether a tenant holding `holding` attempts will wake the claim loop as they end (tenantReopened
 * fires on the way down through its level); one at or below that level never will.
 */
export function tenantWillReopen(
  holding: number,
  otherTenantsRunning: number,
  maxRunning: number,
  maxPerSubscription: number,
): boolean {
  return holding > reopenLevel(maxRunning, maxPerSubscription, otherTenantsRunning);
}

function reopenLevel(maxRunning: number, maxPerSubscription: number, others: number): number {
  const cap = tenantSlotCap(maxRunning, maxPerSubscription, others);
  return cap - Math.ceil(cap / 4);
}

/**
 * A subscription's levels in a worker, from its concurrency limit: a claim takes up to half the
 * limit (`share`); one with more than `reopen` running is left out of claims, and falling back to
 * it reopens the subscription (the claim loop is signalled, held back briefly to gather others);
 * falling to `low` signals at once (its pipe runs low).
 */
export function subscriptionLevels(cap: number): { share: number; reopen: number; low: number } {
  const share = subscriptionClaimShare(cap);
  const reopen = cap - share;
  return { share, reopen, low: Math.floor(reopen / 2) };
}

/**
 * Whether a claim right after one that took `claimed` rows (of `limit`) could find rows that no
 * signal will announce: when it was cut short by its limit, or by a subscription's share or a
 * tenant's room and left that subscription or tenant below the level whose crossing signals.
 * Otherwise it took every row claimable just then, and the next claim waits for a signal.
 */
export function mayHaveMore(
  claimed: ReadonlyArray<{ subscriptionId: string; tenantId: string }>,
  limit: number,
  worker: {
    plan: TenantClaimPlan;
    levels(subscriptionId: string): { share: number; reopen: number };
    runningBySubscription: ReadonlyMap<string, number>;
    runningByTenant: ReadonlyMap<string, number>;
    maxRunning: number;
    maxPerSubscription: number;
  },
): boolean {
  if (claimed.length === 0) return false;
  if (claimed.length >= limit) return true;
  const bySubscription = new Map<string, number>();
  const byTenant = new Map<string, number>();
  for (const { subscriptionId, tenantId } of claimed) {
    bySubscription.set(subscriptionId, (bySubscription.get(subscriptionId) ?? 0) + 1);
    byTenant.set(tenantId, (byTenant.get(tenantId) ?? 0) + 1);
  }
  for (const [id, count] of bySubscription) {
    const holding = worker.runningBySubscription.get(id) ?? 0;
    const { share, reopen } = worker.levels(id);
    if (count >= share && holding <= reopen) return true;
  }
  for (const [tenant, count] of byTenant) {
    const room = worker.plan.room.get(tenant) ?? worker.plan.newcomerRoom;
    const holding = worker.runningByTenant.get(tenant) ?? 0;
    const others = worker.runningByTenant.size - (holding > 0 ? 1 : 0);
    if (
      count >= room &&
      !tenantWillReopen(holding, others, worker.maxRunning, worker.maxPerSubscription)
    ) {
      return true;
    }
  }
  return false;
}

/**
 * The holds receivers asked for (a 429 or 503 with `Retry-After`), per subscription, as this
 * process knows them: its own answers at once, other processes' as their notices arrive.
 */
export class Holds {
  private readonly until = new Map<string, number>();

  /** Holds the subscription until `untilMs`, unless held longer already. */
  hold(subscriptionId: string, untilMs: number): void {
    if ((this.until.get(subscriptionId) ?? 0) < untilMs) this.until.set(subscriptionId, untilMs);
  }

  /** Until when the subscription is held (epoch ms), or null when it is not at `nowMs`. */
  heldUntil(subscriptionId: string, nowMs: number): number | null {
    const until = this.until.get(subscriptionId);
    if (until === undefined) return null;
    if (until > nowMs) return until;
    this.until.delete(subscriptionId);
    return null;
  }

  /** The subscriptions held at `nowMs` (the claim leaves them out). */
  held(nowMs: number): string[] {
    const held: string[] = [];
    for (const id of this.until.keys()) if (this.heldUntil(id, nowMs) !== null) held.push(id);
    return held;
  }
}

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

/**
 * How stale a stored hold read may be: a start within this of the read trusts it. With the
 * recorder writing a hold at once, a start follows another process's 429 by at most this plus
 * the recording's commit: inside the 100 ms promise.
 */
export const STORED_HOLD_READ_MS = 40;

/**
 * Other processes' holds as the database stores them (`held_until`), for a worker no notice
 * reaches: each subscription read at most once per STORED_HOLD_READ_MS, concurrent starts
 * sharing the read. A failed read is no hold (the attempt goes, as without this check).
 */
export class StoredHolds {
  private readonly reads = new BoundedMap<string, { atMs: number; until: Promise<number | null> }>(
    10_000,
  );

  constructor(private readonly read: (subscriptionId: string) => Promise<string | null>) {}

  heldUntil(subscriptionId: string, nowMs: number): Promise<number | null> {
    const last = this.reads.get(subscriptionId);
    if (last !== undefined && nowMs - last.atMs < STORED_HOLD_READ_MS) return last.until;
    const until = this.read(subscriptionId).then(
      (stored) => (stored === null ? null : Date.parse(stored)),
      () => null,
    );
    this.reads.remember(subscriptionId, { atMs: nowMs, until });
    return until;
  }
}
