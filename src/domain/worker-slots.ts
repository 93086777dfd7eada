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
 * endpoints all hang leaves the other half to everyone else, and one with four subscriptions
 * still drains at full speed (4 × 32 = 128 of 256).
 */
export function tenantSlotCap(
  maxInFlight: number,
  maxPerSubscription: number,
  otherTenantsInFlight: number,
): number {
  return Math.max(maxPerSubscription, Math.floor(maxInFlight / (otherTenantsInFlight + 2)));
}

export interface TenantClaimPlan {
  /** Rows a claim may take of each tenant with attempts in flight (its cap less those). */
  room: Map<string, number>;
  /** Tenants at or past their cap: left out of the claim. */
  skip: string[];
  /** Rows a claim may take of a tenant with nothing in flight. */
  newcomerRoom: number;
}

/** What a claim may take of each tenant, given the attempts each has in flight. */
export function tenantClaimPlan(
  inFlightByTenant: ReadonlyMap<string, number>,
  maxInFlight: number,
  maxPerSubscription: number,
): TenantClaimPlan {
  const holders = inFlightByTenant.size;
  const cap = tenantSlotCap(maxInFlight, maxPerSubscription, holders - 1);
  const room = new Map<string, number>();
  const skip: string[] = [];
  for (const [tenant, count] of inFlightByTenant) {
    if (count >= cap) skip.push(tenant);
    else room.set(tenant, cap - count);
  }
  return {
    room,
    skip,
    newcomerRoom: tenantSlotCap(maxInFlight, maxPerSubscription, holders),
  };
}

/**
 * Whether an attempt that just ended (the tenant now has `left` in flight) should wake the claim
 * loop for that tenant: once it has a quarter of its cap free again after being held back, not
 * after every single attempt (a claim per attempt would load the database for nothing).
 */
export function tenantReopened(
  left: number,
  otherTenantsInFlight: number,
  maxInFlight: number,
  maxPerSubscription: number,
): boolean {
  return left === reopenLevel(maxInFlight, maxPerSubscription, otherTenantsInFlight);
}

/**
 * Whether a tenant holding `holding` attempts will wake the claim loop as they end (tenantReopened
 * fires on the way down through its level); one at or below that level never will.
 */
export function tenantWillReopen(
  holding: number,
  otherTenantsInFlight: number,
  maxInFlight: number,
  maxPerSubscription: number,
): boolean {
  return holding > reopenLevel(maxInFlight, maxPerSubscription, otherTenantsInFlight);
}

function reopenLevel(maxInFlight: number, maxPerSubscription: number, others: number): number {
  const cap = tenantSlotCap(maxInFlight, maxPerSubscription, others);
  return cap - Math.ceil(cap / 4);
}
