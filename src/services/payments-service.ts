import type { Updateable } from 'kysely';
import type { Database } from '../db/database.ts';
import type { PaymentsTable } from '../db/schema.ts';
import {
  canMove,
  isOneOf,
  type PAYMENT_MODES,
  PAYMENT_STATUSES,
  PAYMENT_TRANSITIONS,
  type PaymentStatus,
} from '../domain/states.ts';
import { type Clock, nowIso } from '../lib/clock.ts';
import { decodeCursor, type Page, toPage } from '../lib/cursor.ts';
import { newId } from '../lib/ids.ts';
import { invalidTransition, notFound } from '../lib/problems.ts';
import type {
  BookingsRepository,
  PaymentRow,
  PaymentsRepository,
} from '../repositories/bookings-repository.ts';
import { isoDateTime } from './bookings-service.ts';
import type { EventsService } from './events-service.ts';
import { calendarDate, FieldErrorCollector } from './validation.ts';

/** A payment as the API shows it: `isDeposit` as a boolean. */
export type Payment = Omit<PaymentRow, 'isDeposit'> & { isDeposit: boolean };

function toPayment(row: PaymentRow): Payment {
  return { ...row, isDeposit: row.isDeposit === 1 };
}

export interface PaymentListQuery {
  limit: number;
  cursor?: string;
  status?: string;
  bookingId?: string;
}

export interface CreatePaymentInput {
  mode: (typeof PAYMENT_MODES)[number];
  label: string;
  amountCents: number;
  currency: string;
  kind: string;
  scheduledFor?: string;
  paymentRail?: string;
}

/** The API reads payments; the processor (admin API) creates them and moves them. */
export class PaymentsService {
  constructor(
    private readonly database: Database,
    private readonly payments: PaymentsRepository,
    private readonly bookings: BookingsRepository,
    private readonly events: EventsService,
    private readonly clock: Clock,
  ) {}

  async list(tenantId: string, query: PaymentListQuery): Promise<Page<Payment>> {
    const afterId = decodeCursor('payments', query.cursor);
    const status = isOneOf(PAYMENT_STATUSES, query.status) ? query.status : undefined;
    const rows = await this.payments.list(tenantId, {
      afterId,
      limit: query.limit,
      status,
      bookingId: query.bookingId,
    });
    const page = toPage('payments', rows, query.limit);
    return { data: page.data.map(toPayment), meta: page.meta };
  }

  async create(tenantId: string, bookingId: string, input: CreatePaymentInput): Promise<Payment> {
    const errors = new FieldErrorCollector();
    let scheduledFor: string | null = null;
    if (input.scheduledFor !== undefined) {
      scheduledFor =
        input.scheduledFor.length === 10
          ? calendarDate(input.scheduledFor)
          : isoDateTime(input.scheduledFor);
      if (!scheduledFor) errors.add('scheduledFor', 'must be an ISO 8601 date-time');
    }
    errors.throwIfAny();
    return this.database.db.transaction().execute(async (trx) => {
      const booking = await this.bookings.findById(tenantId, bookingId, trx);
      if (!booking) throw notFound('Booking');
      const now = nowIso(this.clock);
      const row = await this.payments.insert(
        {
          id: newId('pay'),
          tenantId,
          bookingId,
          mode: input.mode,
          status: 'pending',
          label: input.label,
          amountCents: input.amountCents,
          currency: input.currency,
          scheduledFor,
          chargedAt: null,
          isDeposit: (await this.payments.hasAnyForBooking(tenantId, bookingId, trx)) ? 0 : 1,
          paymentRail: input.paymentRail ?? null,
          kind: input.kind,
          createdAt: now,
          updatedAt: now,
        },
        trx,
      );
      return toPayment(row);
    });
  }

  async transition(tenantId: string, id: string, to: PaymentStatus): Promise<Payment> {
    return this.database.db.transaction().execute(async (trx) => {
      const payment = await this.payments.findById(tenantId, id, trx);
      if (!payment) throw notFound('Payment');
      const from = payment.status;
      if (!canMove(PAYMENT_TRANSITIONS, from, to)) throw invalidTransition(from, to);
      const now = nowIso(this.clock);
      const patch: Updateable<PaymentsTable> = { status: to, updatedAt: now };
      if (from === 'processing' && to === 'succeeded') patch.chargedAt = now;
      const updated = await this.payments.transition(tenantId, id, from, patch, trx);
      if (!updated) throw invalidTransition(from, to);
      if (to === 'succeeded' || to === 'failed') {
        await this.events.emit(trx, tenantId, `payment.${to}`, {
          paymentId: updated.id,
          bookingId: updated.bookingId,
          status: updated.status,
          amountCents: updated.amountCents,
          currency: updated.currency,
        });
      }
      return toPayment(updated);
    });
  }
}
