/** The five catalogs of a tenant. */
export const LIBRARY_KINDS = ['cities', 'hotels', 'activities', 'vehicles', 'guides'] as const;
export type LibraryKind = (typeof LIBRARY_KINDS)[number];

/** Kinds whose items belong to a city and can be filtered by `cityId`. */
export const CITY_SCOPED_KINDS: readonly LibraryKind[] = ['hotels', 'activities'];
