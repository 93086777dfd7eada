import type { Insertable, Kysely, Selectable, Updateable } from 'kysely';
import type { Executor } from '../db/database.ts';
import type { BookingsTable, DB, PaymentsTable } from '../db/schema.ts';
import type { BookingStatus, PaymentStatus } from '../domain/states.ts';
import { findOwningTenant } from './owning-tenant.ts';

export type BookingRow = Selectable<BookingsTable>;
export type PaymentRow = Selectable<PaymentsTable>;

export interface BookingListFilter {
  afterId: string | null;
  limit: number;
  status?: BookingStatus;
  tripId?: string;
}

export class BookingsRepository {
  constructor(private readonly db: Kysely<DB>) {}

  findById(tenantId: string, id: string, trx: Executor = this.db): Promise<BookingRow | undefined> {
    return trx
      .selectFrom('bookings')
      .selectAll()
      .where('tenantId', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  list(tenantId: string, filter: BookingListFilter, trx: Executor = this.db) {
    let query = trx.selectFrom('bookings').selectAll().where('tenantId', '=', tenantId);
    if (filter.status !== undefined) query = query.where('status', '=', filter.status);
    if (filter.tripId !== undefined) query = query.where('tripId', '=', filter.tripId);
    if (filter.afterId !== null) query = query.where('id', '>', filter.afterId);
    return query
      .orderBy('id')
      .limit(filter.limit + 1)
      .execute();
  }

  insert(row: Insertable<BookingsTable>, trx: Executor = this.db): Promise<BookingRow> {
    return trx.insertInto('bookings').values(row).returningAll().executeTakeFirstOrThrow();
  }

  async numberTaken(tenantId: string, bookingNumber: string, trx: Executor = this.db) {
    const row = await trx
      .selectFrom('bookings')
      .select('id')
      .where('tenantId', '=', tenantId)
      .where('bookingNumber', '=', bookingNumber)
      .executeTakeFirst();
    return row !== undefined;
  }

  /** Compare-and-set on status, so two concurrent transitions cannot both win. */
  transition(
    tenantId: string,
    id: string,
    from: BookingStatus,
    patch: Updateable<BookingsTable>,
    trx: Executor = this.db,
  ): Promise<BookingRow | undefined> {
    return trx
      .updateTable('bookings')
      .set(patch)
      .where('tenantId', '=', tenantId)
      .where('id', '=', id)
      .where('status', '=', from)
      .returningAll()
      .executeTakeFirst();
  }

  findTenantOf(id: string, trx: Executor = this.db): Promise<string | undefined> {
    return findOwningTenant(trx, 'bookings', id);
  }
}

export interface PaymentListFilter {
  afterId: string | null;
  limit: number;
  status?: PaymentStatus;
  bookingId?: string;
}

export class PaymentsRepository {
  constructor(private readonly db: Kysely<DB>) {}

  findById(tenantId: string, id: string, trx: Executor = this.db): Promise<PaymentRow | undefined> {
    return trx
      .selectFrom('payments')
      .selectAll()
      .where('tenantId', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  list(tenantId: string, filter: PaymentListFilter, trx: Executor = this.db) {
    let query = trx.selectFrom('payments').selectAll().where('tenantId', '=', tenantId);
    if (filter.status !== undefined) query = query.where('status', '=', filter.status);
    if (filter.bookingId !== undefined) query = query.where('bookingId', '=', filter.bookingId);
    if (filter.afterId !== null) query = query.where('id', '>', filter.afterId);
    return query
      .orderBy('id')
      .limit(filter.limit + 1)
      .execute();
  }

  insert(row: Insertable<PaymentsTable>, trx: Executor = this.db): Promise<PaymentRow> {
    return trx.insertInto('payments').values(row).returningAll().executeTakeFirstOrThrow();
  }

  async hasAnyForBooking(tenantId: string, bookingId: string, trx: Executor = this.db) {
    const row = await trx
      .selectFrom('payments')
      .select('id')
      .where('tenantId', '=', tenantId)
      .where('bookingId', '=', bookingId)
      .limit(1)
      .executeTakeFirst();
    return row !== undefined;
  }

  transition(
    tenantId: string,
    id: string,
    from: PaymentStatus,
    patch: Updateable<PaymentsTable>,
    trx: Executor = this.db,
  ): Promise<PaymentRow | undefined> {
    return trx
      .updateTable('payments')
      .set(patch)
      .where('tenantId', '=', tenantId)
      .where('id', '=', id)
      .where('status', '=', from)
      .returningAll()
      .executeTakeFirst();
  }

  findTenantOf(id: string, trx: Executor = this.db): Promise<string | undefined> {
    return findOwningTenant(trx, 'payments', id);
  }
}
