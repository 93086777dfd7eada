/** The five catalogs of a tenant. */
export const LIBRARY_KINDS = ['cities', 'hotels', 'activities', 'vehicles', 'guides'] as const;
export type LibraryKind = (typeof LIBRARY_KINDS)[number];

/** Kinds whose items belong to a city and can be filtered by `cityId`. */
export const CITY_SCOPED_KINDS: readonly LibraryKind[] = ['hotels', 'activities'];

/**
 * The 422 message for a city id the tenant's library lacks: it says where ids come from, since a
 * new tenant has no cities until the operator adds some.
 */
export const NOT_A_LIBRARY_CITY =
  "is not a city of this tenant's library: take an id from GET /api/v1/libraries/cities (the " +
  'operator adds cities with POST /admin/v1/tenants/{tenantId}/library/cities)';
