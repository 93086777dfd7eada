import { randomBytes } from 'node:crypto';
import type { Updateable } from 'kysely';
import type { Database } from '../db/database.ts';
import type { TripsTable } from '../db/schema.ts';
import { NOT_A_LIBRARY_CITY } from '../domain/library.ts';
import { effectiveTripQuota } from '../domain/plans.ts';
import {
  canMove,
  isOneOf,
  type PRICING_DISPLAY_MODES,
  type TRANSPORT_MODES,
  TRIP_MOVE_EVENTS,
  TRIP_STATUSES,
  TRIP_TRANSITIONS,
  type TripStatus,
} from '../domain/states.ts';
import { type Clock, changedAt, nowIso } from '../lib/clock.ts';
import { keysetPage, type Page, type PageRequest } from '../lib/cursor.ts';
import { newId, uniqueHumanCode } from '../lib/ids.ts';
import { canonicalInstant } from '../lib/instant.ts';
import { forbidden, invalidTransition, notFound } from '../lib/problems.ts';
import type { ClientsRepository } from '../repositories/clients-repository.ts';
import type { LibraryRepository } from '../repositories/library-repository.ts';
import type { TenantsRepository } from '../repositories/tenants-repository.ts';
import type { TripRow, TripsRepository } from '../repositories/trips-repository.ts';
import type { EventsService } from './events-service.ts';
import { owningTenant } from './owner.ts';
import { calendarDate, FieldErrorCollector } from './validation.ts';

export interface TripListQuery extends PageRequest {
  status?: string;
  publishedAtGte?: string;
}

export interface CreateTripInput {
  title: string;
  startDate: string;
  endDate?: string;
  daysCount: number;
  startCityId: string;
  endCityId: string;
  transportMode?: (typeof TRANSPORT_MODES)[number];
  pricingDisplayMode?: (typeof PRICING_DISPLAY_MODES)[number];
  notes?: string;
  shortDescription?: string;
  longDescription?: string;
  clientId?: string;
}

export interface PatchTripInput {
  title?: string;
  startDate?: string;
  endDate?: string | null;
  daysCount?: number;
  notes?: string | null;
  shortDescription?: string | null;
  longDescription?: string | null;
  clientId?: string | null;
}

export function isPublished(trip: Pick<TripRow, 'publishedAt' | 'unpublishedAt'>): boolean {
  return trip.publishedAt !== null && trip.unpublishedAt === null;
}

function slugify(title: string): string {
  const base = title
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 60);
  return `${base || 'trip'}-${randomBytes(3).toString('hex')}`;
}

type TripChangeType = 'trip.created' | 'trip.updated' | 'trip.published' | 'trip.unpublished';

interface TripsServiceDeps {
  database: Database;
  trips: TripsRepository;
  tenants: TenantsRepository;
  clients: ClientsRepository;
  library: LibraryRepository;
  events: EventsService;
  clock: Clock;
}

export class TripsService {
  constructor(private readonly deps: TripsServiceDeps) {}

  /** The tenant that owns this trip (the admin API addresses it by id alone). */
  tenantOf(id: string): Promise<string> {
    return owningTenant(this.deps.trips, id, 'Trip');
  }

  async list(tenantId: string, query: TripListQuery): Promise<Page<TripRow>> {
    // An unknown status value is ignored, not an error (as documented for the filter).
    const status = isOneOf(TRIP_STATUSES, query.status) ? query.status : undefined;
    const publishedAtGte =
      query.publishedAtGte === undefined
        ? undefined
        : canonicalInstant('publishedAt[gte]', query.publishedAtGte);
    return keysetPage('trips', query, (afterId, limit) =>
      this.deps.trips.list(tenantId, { afterId, limit, status, publishedAtGte }),
    );
  }

  async get(tenantId: string, id: string): Promise<TripRow> {
    const trip = await this.deps.trips.findById(tenantId, id);
    if (!trip) throw notFound('Trip');
    return trip;
  }

  /** `actorId` is recorded as the trip's creator (audit). */
  async create(tenantId: string, actorId: string, input: CreateTripInput): Promise<TripRow> {
    const errors = new FieldErrorCollector();
    const startDate = calendarDate(input.startDate);
    if (!startDate) errors.add('startDate', 'must be a calendar date (YYYY-MM-DD)');
    const endDate = input.endDate === undefined ? null : calendarDate(input.endDate);
    if (input.endDate !== undefined && !endDate) {
      errors.add('endDate', 'must be a calendar date (YYYY-MM-DD)');
    }
    if (startDate && endDate && endDate < startDate) {
      errors.add('endDate', 'must be on or after startDate');
    }
    await this.checkReferences(tenantId, input, errors);
    errors.throwIfAny();

    return this.deps.database.withTransaction(async () => {
      await this.assertTripRoom(tenantId);
      const now = nowIso(this.deps.clock);
      const trip = await this.deps.trips.insert({
        id: newId('trp'),
        tenantId,
        tripNumber: await uniqueHumanCode('TR', (code) =>
          this.deps.trips.numberTaken(tenantId, code),
        ),
        title: input.title,
        status: 'draft',
        tripMode: 'tailor_made',
        dateMode: endDate ? 'range_based' : 'departure_based',
        publicSlug: null,
        publishedAt: null,
        unpublishedAt: null,
        startDate,
        endDate,
        daysCount: input.daysCount,
        startCityId: input.startCityId,
        endCityId: input.endCityId,
        transportMode: input.transportMode ?? 'own_fleet',
        pricingDisplayMode: input.pricingDisplayMode ?? 'per_person',
        shortDescription: input.shortDescription ?? null,
        longDescription: input.longDescription ?? null,
        clientId: input.clientId ?? null,
        notes: input.notes ?? null,
        version: 1,
        createdBy: actorId,
        createdAt: now,
        updatedAt: now,
      });
      await this.emitChange(trip, 'trip.created', null);
      return trip;
    });
  }

  /**
   * 403 when the plan's trip quota is full. Counted under the tenant row's lock, so concurrent
   * creates take turns and cannot overshoot; a plan without a quota locks nothing, and its
   * creates run side by side.
   */
  private async assertTripRoom(tenantId: string): Promise<void> {
    const tenant = await this.deps.tenants.findById(tenantId);
    if (!tenant) throw notFound('Tenant');
    if (effectiveTripQuota(tenant) === null) return;
    const locked = await this.deps.tenants.lockForQuota(tenantId);
    const quota = locked ? effectiveTripQuota(locked) : null;
    if (quota !== null && (await this.deps.trips.count(tenantId)) >= quota) {
      throw forbidden(`The trip quota of this plan (${quota}) is full.`, 'trip_quota_exceeded');
    }
  }

  /**
   * Applies a PATCH, with its `trip.updated` event, in one transaction: the trip is locked first,
   * so the event's `changes` are from the state this change was made on.
   */
  async update(tenantId: string, id: string, input: PatchTripInput): Promise<TripRow> {
    const errors = new FieldErrorCollector();
    const patch: Updateable<TripsTable> = {};
    if (input.title !== undefined) patch.title = input.title;
    if (input.daysCount !== undefined) patch.daysCount = input.daysCount;
    for (const field of ['notes', 'shortDescription', 'longDescription'] as const) {
      if (input[field] !== undefined) patch[field] = input[field];
    }
    if (input.startDate !== undefined) {
      const startDate = calendarDate(input.startDate);
      if (startDate) patch.startDate = startDate;
      else errors.add('startDate', 'must be a calendar date (YYYY-MM-DD)');
    }
    if (input.endDate !== undefined) {
      const endDate = input.endDate === null ? null : calendarDate(input.endDate);
      if (input.endDate !== null && !endDate) {
        errors.add('endDate', 'must be a calendar date (YYYY-MM-DD)');
      } else {
        patch.endDate = endDate;
        patch.dateMode = endDate ? 'range_based' : 'departure_based';
      }
    }
    if (input.clientId !== undefined) {
      if (input.clientId !== null && !(await this.deps.clients.exists(tenantId, input.clientId))) {
        errors.add('clientId', 'is not a client of this tenant');
      }
      patch.clientId = input.clientId;
    }
    return this.deps.database.withTransaction(async () => {
      const current = await this.deps.trips.lockById(tenantId, id);
      if (!current) throw notFound('Trip');
      const start = patch.startDate ?? current.startDate;
      const end = patch.endDate === undefined ? current.endDate : patch.endDate;
      if (start && end && end < start && (patch.startDate || patch.endDate)) {
        errors.add('endDate', 'must be on or after startDate');
      }
      errors.throwIfAny();
      if (Object.keys(patch).length === 0) return current;
      const updated = await this.deps.trips.update(
        tenantId,
        id,
        { ...patch, updatedAt: changedAt(this.deps.clock, current.updatedAt) },
        { bumpVersion: true },
      );
      if (!updated) throw notFound('Trip');
      await this.emitChange(updated, 'trip.updated', current);
      return updated;
    });
  }

  async publish(tenantId: string, id: string): Promise<TripRow> {
    return this.deps.database.withTransaction(async () => {
      const trip = await this.deps.trips.lockById(tenantId, id);
      if (!trip) throw notFound('Trip');
      if (isPublished(trip)) return trip;
      const now = changedAt(this.deps.clock, trip.updatedAt);
      const updated = await this.deps.trips.update(tenantId, id, {
        publicSlug: trip.publicSlug ?? slugify(trip.title),
        publishedAt: now,
        unpublishedAt: null,
        updatedAt: now,
      });
      if (!updated) throw notFound('Trip');
      await this.emitChange(updated, 'trip.published', trip);
      return updated;
    });
  }

  async unpublish(tenantId: string, id: string): Promise<TripRow> {
    return this.deps.database.withTransaction(async () => {
      const trip = await this.deps.trips.lockById(tenantId, id);
      if (!trip) throw notFound('Trip');
      if (!isPublished(trip)) return trip;
      const now = changedAt(this.deps.clock, trip.updatedAt);
      const updated = await this.deps.trips.update(tenantId, id, {
        unpublishedAt: now,
        updatedAt: now,
      });
      if (!updated) throw notFound('Trip');
      await this.emitChange(updated, 'trip.unpublished', trip);
      return updated;
    });
  }

  /** A move of the trip's status (the operator console's), with its `trip.updated` event. */
  async setStatus(tenantId: string, id: string, to: TripStatus): Promise<TripRow> {
    return this.deps.database.withTransaction(async () => {
      const trip = await this.deps.trips.lockById(tenantId, id);
      if (!trip) throw notFound('Trip');
      if (!canMove(TRIP_TRANSITIONS, trip.status, to)) {
        throw invalidTransition(TRIP_TRANSITIONS, trip.status, to);
      }
      const updated = await this.deps.trips.update(
        tenantId,
        id,
        { status: to, updatedAt: changedAt(this.deps.clock, trip.updatedAt) },
        { fromStatus: trip.status },
      );
      if (!updated) throw notFound('Trip');
      const types = TRIP_MOVE_EVENTS[`${trip.status}>${to}`] as 'trip.updated'[];
      await this.emitChange(updated, types, trip);
      return updated;
    });
  }

  /** A trip's creation or change, with the trip as it is now and what moved from `before`. */
  private async emitChange(
    trip: TripRow,
    type: TripChangeType | readonly TripChangeType[],
    before: TripRow | null,
  ): Promise<void> {
    const members = {
      tripId: trip.id,
      publicSlug: trip.publicSlug,
      publishedAt: trip.publishedAt,
      unpublishedAt: trip.unpublishedAt,
    };
    await this.deps.events.emitChange(trip.tenantId, type, members, { before, after: trip });
  }

  private async checkReferences(
    tenantId: string,
    input: Pick<CreateTripInput, 'startCityId' | 'endCityId' | 'clientId'>,
    errors: FieldErrorCollector,
  ): Promise<void> {
    for (const field of ['startCityId', 'endCityId'] as const) {
      if (!(await this.deps.library.exists(tenantId, 'cities', input[field]))) {
        errors.add(field, NOT_A_LIBRARY_CITY);
      }
    }
    if (
      input.clientId !== undefined &&
      !(await this.deps.clients.exists(tenantId, input.clientId))
    ) {
      errors.add('clientId', 'is not a client of this tenant');
    }
  }
}
