/**
 * Admission: which claimed rows a worker may take, as pure functions: fair shares of the worker's
 * slots per tenant and per subscription, and when slots a settled claim frees reopen claims. The
 * loop asks; nothing here waits. (What is on hold: holds.ts; the pace of a capped subscription:
 * pace.ts.)
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
 * loop for that tenant: once it has a quarter of its cap free again after being left out, not
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
 * it reopens the subscription (the claim loop is signalled, deferred briefly to gather others);
 * falling to `low` signals at once (its pipe runs low).
 */
export function subscriptionLevels(cap: number): { share: number; reopen: number; low: number } {
  const share = subscriptionClaimShare(cap);
  const reopen = cap - share;
  return { share, reopen, low: Math.floor(reopen / 2) };
}

/** What a claim's settlement left running here (see WorkerClaims.settled). */
export interface RunningLeft {
  /** Attempts still running to its subscription, and to its tenant. */
  subscription: number;
  tenant: number;
  /** Tenants other than its own with attempts running. */
  otherTenants: number;
  /** The subscription's limit here as the claim ran. */
  limit: number;
}

/**
 * What a settlement tells the claim loop: `reopened` when its tenant fell to its reopen level
 * (see tenantReopened) or its subscription to its own (the claim deferred briefly, so that other
 * subscriptions reopening join it), `low` when the subscription fell to its low level (claimed for
 * at once), else nothing.
 */
export function reopening(
  left: RunningLeft,
  maxRunning: number,
  maxPerSubscription: number,
): 'reopened' | 'low' | null {
  if (tenantReopened(left.tenant, left.otherTenants, maxRunning, maxPerSubscription)) {
    return 'reopened';
  }
  const { reopen, low } = subscriptionLevels(left.limit);
  if (left.subscription === low) return 'low';
  return left.subscription === reopen ? 'reopened' : null;
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
