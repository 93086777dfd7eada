import type { Updateable } from 'kysely';
import type { Database } from '../db/database.ts';
import type { BookingsTable } from '../db/schema.ts';
import {
  BOOKING_MOVE_EVENTS,
  BOOKING_STATUSES,
  BOOKING_TRANSITIONS,
  type BookingStatus,
  canMove,
  type EventType,
  isOneOf,
} from '../domain/states.ts';
import { type Clock, changedAt, nowIso } from '../lib/clock.ts';
import { keysetPage, type Page, type PageRequest } from '../lib/cursor.ts';
import { newId, uniqueHumanCode } from '../lib/ids.ts';
import { ApiProblem, fieldError, invalidTransition, notFound } from '../lib/problems.ts';
import type { BookingRow, BookingsRepository } from '../repositories/bookings-repository.ts';
import type { TripsRepository } from '../repositories/trips-repository.ts';
import type { EventsService } from './events-service.ts';
import { owningTenant } from './owner.ts';
import { isPublished } from './trips-service.ts';
import { calendarDate, FieldErrorCollector } from './validation.ts';

export interface BookingListQuery extends PageRequest {
  status?: string;
  tripId?: string;
}

export interface CreateBookingInput {
  tripId: string;
  totalRetailCents: number;
  currency: string;
  travelerName: string;
  travelerEmail: string;
  departureId?: string;
  departureStartDate?: string;
  departureEndDate?: string;
}

/** Platform fee: 2% of the retail total, capped at 4,000 minor units (40.00). */
export function applicationFee(totalRetailCents: number): number {
  return Math.min(Math.round(totalRetailCents * 0.02), 4000);
}

interface BookingsServiceDeps {
  database: Database;
  bookings: BookingsRepository;
  trips: TripsRepository;
  events: EventsService;
  clock: Clock;
  storefrontBaseUrl: string;
}

export class BookingsService {
  constructor(private readonly deps: BookingsServiceDeps) {}

  /** The tenant that owns this booking (the admin API addresses it by id alone). */
  tenantOf(id: string): Promise<string> {
    return owningTenant(this.deps.bookings, id, 'Booking');
  }

  async list(tenantId: string, query: BookingListQuery): Promise<Page<BookingRow>> {
    const status = isOneOf(BOOKING_STATUSES, query.status) ? query.status : undefined;
    return keysetPage('bookings', query, (afterId, limit) =>
      this.deps.bookings.list(tenantId, { afterId, limit, status, tripId: query.tripId }),
    );
  }

  async get(tenantId: string, id: string): Promise<BookingRow> {
    const booking = await this.deps.bookings.findById(tenantId, id);
    if (!booking) throw notFound('Booking');
    return booking;
  }

  async assertTripExists(tenantId: string, tripId: string): Promise<void> {
    if (!(await this.deps.trips.findById(tenantId, tripId))) throw notFound('Trip');
  }

  /**
   * POST /api/v1/bookings: validates like a real creation would, then answers 501 with the
   * storefront checkout where the traveller completes the purchase. Nothing is written.
   */
  async refuseApiCreation(tenantId: string, tripId: string): Promise<never> {
    const trip = await this.deps.trips.findById(tenantId, tripId);
    if (!trip) throw notFound('Trip');
    if (!isPublished(trip) || !trip.publicSlug) {
      throw fieldError('tripId', 'trip is not published');
    }
    throw new ApiProblem(
      'booking-create-not-supported',
      'Bookings cannot be created through the API yet; send the traveller to next.checkoutUrl.',
      { next: { checkoutUrl: `${this.deps.storefrontBaseUrl}/checkout/${trip.publicSlug}` } },
    );
  }

  /** The admin API's booking creation: the trip, addressed by id alone, names the tenant. */
  async createForTrip(input: CreateBookingInput): Promise<BookingRow> {
    const tenantId = await this.deps.trips.findTenantOf(input.tripId);
    if (!tenantId) throw fieldError('tripId', 'is not a known trip');
    return this.create(tenantId, input);
  }

  /** Checkout's booking creation (admin API): only on a published trip, pinned to its version. */
  async create(tenantId: string, input: CreateBookingInput): Promise<BookingRow> {
    const errors = new FieldErrorCollector();
    const departureStartDate = this.optionalDate(
      input.departureStartDate,
      'departureStartDate',
      errors,
    );
    const departureEndDate = this.optionalDate(input.departureEndDate, 'departureEndDate', errors);
    errors.throwIfAny();
    return this.deps.database.withTransaction(async () => {
      // Locked: the version pinned and the snapshot are the trip's until this booking commits.
      const trip = await this.deps.trips.lockById(tenantId, input.tripId);
      if (!trip) throw fieldError('tripId', 'is not a trip of this tenant');
      if (!isPublished(trip)) throw fieldError('tripId', 'trip is not published');
      const now = nowIso(this.deps.clock);
      const { tenantId: _tenant, createdBy: _actor, ...snapshot } = trip;
      const booking = await this.deps.bookings.insert({
        id: newId('bkg'),
        tenantId,
        bookingNumber: await uniqueHumanCode('BK', (code) =>
          this.deps.bookings.numberTaken(tenantId, code),
        ),
        tripId: trip.id,
        tripVersion: trip.version,
        tripSnapshot: JSON.stringify(snapshot),
        status: 'payment_pending',
        totalRetailCents: input.totalRetailCents,
        applicationFeeCents: applicationFee(input.totalRetailCents),
        currency: input.currency,
        travelerName: input.travelerName,
        travelerEmail: input.travelerEmail,
        confirmedAt: null,
        cancelledAt: null,
        departureId: input.departureId ?? null,
        departureStartDate,
        departureEndDate,
        createdAt: now,
        updatedAt: now,
      });
      await this.emitChange(booking, ['booking.created'], null);
      return booking;
    });
  }

  async transition(tenantId: string, id: string, to: BookingStatus): Promise<BookingRow> {
    return this.deps.database.withTransaction(async () => {
      // Locked first: the move, its before-image and its time are decided on the state it is
      // made from, and a concurrent move waits, then is judged from where this one left it.
      const booking = await this.deps.bookings.lockById(tenantId, id);
      if (!booking) throw notFound('Booking');
      const from = booking.status;
      if (!canMove(BOOKING_TRANSITIONS, from, to)) {
        throw invalidTransition(BOOKING_TRANSITIONS, from, to);
      }
      const now = changedAt(this.deps.clock, booking.updatedAt);
      const patch: Updateable<BookingsTable> = { status: to, updatedAt: now };
      if (to === 'confirmed' && booking.confirmedAt === null) patch.confirmedAt = now;
      if (to === 'cancelled') patch.cancelledAt = now;
      const updated = await this.deps.bookings.transition(tenantId, id, from, patch);
      if (!updated) throw notFound('Booking');
      const announced = BOOKING_MOVE_EVENTS[`${from}>${to}`];
      await this.emitChange(updated, announced, booking);
      return updated;
    });
  }

  /**
   * The events of a booking's creation or change (a move's own types, else `booking.updated`),
   * each with the booking as it is now and what moved from `before`.
   */
  private async emitChange(
    booking: BookingRow,
    types: readonly EventType[],
    before: BookingRow | null,
  ): Promise<void> {
    const members = {
      bookingId: booking.id,
      tripId: booking.tripId,
      status: booking.status,
      totalRetailCents: booking.totalRetailCents,
      currency: booking.currency,
    };
    await this.deps.events.emitChange(booking.tenantId, types as 'booking.updated'[], members, {
      before,
      after: booking,
    });
  }

  private optionalDate(
    value: string | undefined,
    field: string,
    errors: FieldErrorCollector,
  ): string | null {
    if (value === undefined) return null;
    const date = value.length === 10 ? calendarDate(value) : isoDateTime(value);
    if (!date) errors.add(field, 'must be a date (YYYY-MM-DD) or an ISO 8601 date-time');
    return date;
  }
}

export function isoDateTime(value: string): string | null {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(value))
    return null;
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? null : date.toISOString();
}
