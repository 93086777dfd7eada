/**
 * How many of a worker's attempt slots one tenant may hold: an equal share among the tenants
 * holding slots now plus one more, so there is always room for a tenant that has none yet, but
 * never less than one subscription's cap. Alone, a tenant gets half the slots: a tenant whose
 * endpoints all hang leaves the other half to everyone else, and one with many subscriptions
 * still drains at full speed (4 subscriptions × 32 = 128 of 256).
 */
export function tenantSlotCap(
  maxInFlight: number,
  maxPerSubscription: number,
  otherTenantsInFlight: number,
): number {
  return Math.max(maxPerSubscription, Math.floor(maxInFlight / (otherTenantsInFlight + 2)));
}

/**
 * The rows one claim may take of each tenant, and the tenants to leave out of it, given the
 * attempts each tenant has in flight: a tenant is left out when the claim's share could take it
 * past its cap, so no tenant ever holds more than its cap here.
 */
export function tenantClaimPlan(
  inFlightByTenant: ReadonlyMap<string, number>,
  maxInFlight: number,
  maxPerSubscription: number,
): { perTenant: number; skip: string[] } {
  const holders = inFlightByTenant.size;
  // The share of a tenant that holds nothing yet: the smallest cap any tenant has right now.
  const newcomerCap = tenantSlotCap(maxInFlight, maxPerSubscription, holders);
  const perTenant = Math.max(1, Math.ceil(newcomerCap / 2));
  const skip: string[] = [];
  for (const [tenant, count] of inFlightByTenant) {
    const cap = tenantSlotCap(maxInFlight, maxPerSubscription, holders - 1);
    if (count + perTenant > cap) skip.push(tenant);
  }
  return { perTenant, skip };
}
