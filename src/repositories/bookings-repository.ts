import type { Selectable } from 'kysely';
import type { BookingsTable } from '../db/schema.ts';
import type { BookingStatus } from '../domain/states.ts';
import { type StatusListFilter, StatusRowsRepository } from './status-rows.ts';

export type BookingRow = Selectable<BookingsTable>;

export interface BookingListFilter extends StatusListFilter<BookingStatus> {
  tripId?: string;
}

export class BookingsRepository extends StatusRowsRepository<'bookings'> {
  protected readonly table = 'bookings';
  protected readonly parentColumn = 'tripId';

  list(tenantId: string, filter: BookingListFilter): Promise<BookingRow[]> {
    return this.page(tenantId, filter, filter.tripId);
  }

  async numberTaken(tenantId: string, bookingNumber: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('bookings')
      .select('id')
      .where('tenantId', '=', tenantId)
      .where('bookingNumber', '=', bookingNumber)
      .executeTakeFirst();
    return row !== undefined;
  }
}
