import type { Executor } from '../db/database.ts';

/**
 * The tenant that owns a row, for the admin API, which addresses trips, bookings, payments,
 * clients and webhook subscriptions by id alone. Ids are globally unique, so no tenant is needed to find the owner.
 */
export function findOwningTenant(
  trx: Executor,
  table: 'trips' | 'bookings' | 'payments' | 'clients' | 'webhookSubscriptions',
  id: string,
): Promise<string | undefined> {
  return trx
    .selectFrom(table as 'trips')
    .select('tenantId')
    .where('id', '=', id)
    .executeTakeFirst()
    .then((row) => row?.tenantId);
}
