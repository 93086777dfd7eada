/** Plan tiers. `null` quota means unlimited. */
export const TIERS = {
  free: { api: false, webhooks: false, tripQuota: 0, webhookEndpointCap: 0 },
  starter: { api: true, webhooks: false, tripQuota: 100, webhookEndpointCap: 0 },
  pro: { api: true, webhooks: true, tripQuota: 1000, webhookEndpointCap: 10 },
  enterprise: { api: true, webhooks: true, tripQuota: null, webhookEndpointCap: 100 },
} as const satisfies Record<
  string,
  { api: boolean; webhooks: boolean; tripQuota: number | null; webhookEndpointCap: number }
>;

export type Tier = keyof typeof TIERS;
export const TIER_NAMES = Object.keys(TIERS) as Tier[];
export const PLANS_WITH_API: Tier[] = TIER_NAMES.filter((tier) => TIERS[tier].api);

export function isTier(value: string): value is Tier {
  return Object.hasOwn(TIERS, value);
}

/** The tenant's own override wins over the plan default. */
export function effectiveTripQuota(tenant: { tier: string; tripQuota: number | null }) {
  if (tenant.tripQuota !== null) return tenant.tripQuota;
  return isTier(tenant.tier) ? TIERS[tenant.tier].tripQuota : 0;
}

export function effectiveWebhookEndpointCap(tenant: {
  tier: string;
  webhookEndpointCap: number | null;
}): number {
  if (tenant.webhookEndpointCap !== null) return tenant.webhookEndpointCap;
  return isTier(tenant.tier) ? TIERS[tenant.tier].webhookEndpointCap : 0;
}

export const SCOPES = [
  'trips:read',
  'trips:write',
  'bookings:read',
  'bookings:write',
  'clients:read',
  'clients:write',
  'payments:read',
  'libraries:read',
  'webhooks:read',
  'webhooks:write',
] as const;

export type Scope = (typeof SCOPES)[number];

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

/**
 * The scope that reads an event (`GET /api/v1/events/{id}`): its resource's read scope, since the
 * event carries that resource (payments and disputes: `payments:read`; `webhook.*`:
 * `webhooks:read`; an erasure's announcement: `clients:read`, the scope's side that reads people).
 */
export function eventReadScope(type: string): Scope {
  const prefix = type.slice(0, type.indexOf('.'));
  switch (prefix) {
    case 'trip':
      return 'trips:read';
    case 'booking':
      return 'bookings:read';
    case 'payment':
    case 'dispute':
      return 'payments:read';
    case 'client':
    case 'personal_data':
      return 'clients:read';
    default:
      return 'webhooks:read';
  }
}
