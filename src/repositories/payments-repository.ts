import type { Selectable } from 'kysely';
import type { PaymentsTable } from '../db/schema.ts';
import type { PaymentStatus } from '../domain/states.ts';
import { type StatusListFilter, StatusRowsRepository } from './status-rows.ts';

export type PaymentRow = Selectable<PaymentsTable>;

export interface PaymentListFilter extends StatusListFilter<PaymentStatus> {
  bookingId?: string;
}

export class PaymentsRepository extends StatusRowsRepository<'payments'> {
  protected readonly table = 'payments';
  protected readonly parentColumn = 'bookingId';

  list(tenantId: string, filter: PaymentListFilter): Promise<PaymentRow[]> {
    return this.page(tenantId, filter, filter.bookingId);
  }

  async hasAnyForBooking(tenantId: string, bookingId: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('payments')
      .select('id')
      .where('tenantId', '=', tenantId)
      .where('bookingId', '=', bookingId)
      .limit(1)
      .executeTakeFirst();
    return row !== undefined;
  }
}
