import { notFound } from '../lib/problems.ts';

/**
 * The tenant that owns a row the admin API addresses by id alone (ids are global); 404 naming
 * `what` when there is no such row.
 */
export async function owningTenant(
  rows: { findTenantOf(id: string): Promise<string | undefined> },
  id: string,
  what: string,
): Promise<string> {
  const tenantId = await rows.findTenantOf(id);
  if (!tenantId) throw notFound(what);
  return tenantId;
}
