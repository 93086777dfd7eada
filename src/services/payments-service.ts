import type { Updateable } from 'kysely';
import type { Database } from '../db/database.ts';
import type { PaymentsTable } from '../db/schema.ts';
import {
  canMove,
  type EventType,
  isOneOf,
  type PAYMENT_MODES,
  PAYMENT_MOVE_EVENTS,
  PAYMENT_STATUSES,
  PAYMENT_TRANSITIONS,
  type PaymentStatus,
} from '../domain/states.ts';
import { type Clock, changedAt, nowIso } from '../lib/clock.ts';
import { keysetPage, type Page, type PageRequest } from '../lib/cursor.ts';
import { newId } from '../lib/ids.ts';
import { invalidTransition, notFound } from '../lib/problems.ts';
import type { BookingsRepository } from '../repositories/bookings-repository.ts';
import type { PaymentRow, PaymentsRepository } from '../repositories/payments-repository.ts';
import { isoDateTime } from './bookings-service.ts';
import type { EventsService } from './events-service.ts';
import { owningTenant } from './owner.ts';
import { calendarDate, FieldErrorCollector } from './validation.ts';

export interface PaymentListQuery extends PageRequest {
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
interface PaymentsServiceDeps {
  database: Database;
  payments: PaymentsRepository;
  bookings: BookingsRepository;
  events: EventsService;
  clock: Clock;
}

export class PaymentsService {
  constructor(private readonly deps: PaymentsServiceDeps) {}

  /** The tenant that owns this payment (the admin API addresses it by id alone). */
  tenantOf(id: string): Promise<string> {
    return owningTenant(this.deps.payments, id, 'Payment');
  }

  async list(tenantId: string, query: PaymentListQuery): Promise<Page<PaymentRow>> {
    const status = isOneOf(PAYMENT_STATUSES, query.status) ? query.status : undefined;
    return keysetPage('payments', query, (afterId, limit) =>
      this.deps.payments.list(tenantId, { afterId, limit, status, bookingId: query.bookingId }),
    );
  }

  async create(
    tenantId: string,
    bookingId: string,
    input: CreatePaymentInput,
  ): Promise<PaymentRow> {
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
    return this.deps.database.withTransaction(async () => {
      // The booking locked: its payments are created one at a time, so "the first" is decided
      // once (payments inserted under it take only a key-share lock, which this one allows).
      const booking = await this.deps.bookings.lockById(tenantId, bookingId);
      if (!booking) throw notFound('Booking');
      const now = nowIso(this.deps.clock);
      const row = await this.deps.payments.insert({
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
        isDeposit: !(await this.deps.payments.hasAnyForBooking(tenantId, bookingId)),
        paymentRail: input.paymentRail ?? null,
        kind: input.kind,
        createdAt: now,
        updatedAt: now,
      });
      await this.emitChange(row, ['payment.created'], null);
      return row;
    });
  }

  async transition(tenantId: string, id: string, to: PaymentStatus): Promise<PaymentRow> {
    return this.deps.database.withTransaction(async () => {
      // Locked first, as a booking's move (see BookingsService.transition).
      const payment = await this.deps.payments.lockById(tenantId, id);
      if (!payment) throw notFound('Payment');
      const from = payment.status;
      if (!canMove(PAYMENT_TRANSITIONS, from, to)) {
        throw invalidTransition(PAYMENT_TRANSITIONS, from, to);
      }
      const now = changedAt(this.deps.clock, payment.updatedAt);
      const patch: Updateable<PaymentsTable> = { status: to, updatedAt: now };
      if (from === 'processing' && to === 'succeeded') patch.chargedAt = now;
      const updated = await this.deps.payments.transition(tenantId, id, from, patch);
      if (!updated) throw notFound('Payment');
      const announced = PAYMENT_MOVE_EVENTS[`${from}>${to}`];
      await this.emitChange(updated, announced, payment);
      return updated;
    });
  }

  /**
   * The events of a payment's creation or change (a move's own types, else `payment.updated`),
   * each with the payment as it is now and what moved from `before`.
   */
  private async emitChange(
    payment: PaymentRow,
    types: readonly EventType[],
    before: PaymentRow | null,
  ): Promise<void> {
    const members = {
      paymentId: payment.id,
      bookingId: payment.bookingId,
      status: payment.status,
      amountCents: payment.amountCents,
      currency: payment.currency,
    };
    await this.deps.events.emitChange(payment.tenantId, types as 'payment.updated'[], members, {
      before,
      after: payment,
    });
  }
}
