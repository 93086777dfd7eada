/**
 * Seeds one benchmark tenant: an enterprise tenant (no trip quota), two library cities, a token
 * with every scope, and N trips inserted straight through Kysely in multi-row batches inside
 * transactions (100,000 trips take seconds, not the minutes the HTTP API would need).
 */
import type { Insertable } from 'kysely';
import { sql } from 'kysely';
import pino from 'pino';
import { loadConfig } from '../src/config.ts';
import type { TripsTable } from '../src/db/schema.ts';
import { TRIP_STATUSES } from '../src/domain/states.ts';
import { encodeCursor } from '../src/lib/cursor.ts';
import { CROCKFORD, newId } from '../src/lib/ids.ts';
import { createRuntime } from '../src/runtime.ts';

export interface SeededTenant {
  tenantId: string;
  /** `tk_test_…` with every scope. */
  token: string;
  trips: number;
  /** A trip in the middle of the list, for the single-trip read. */
  tripId: string;
  /** Cursor whose page starts at the middle of the tenant's list (keyset position trips/2). */
  middleCursor: string;
  /** The tenant's two library cities (a trip's start and end). */
  cityIds: [string, string];
  seedMs: number;
}

/** Rows per INSERT (25 columns: 12,500 bind parameters, under both backends' limits). */
const BATCH_ROWS = 500;
/** Rows per transaction. */
const TRANSACTION_ROWS = 10_000;

const TITLES = [
  'Lisbon & Porto',
  'Algarve coast',
  'Andalusia classics',
  'Douro valley',
  'Madeira hikes',
  'Azores islands',
];
const SHORT =
  'Hand-picked hotels, private transfers and a local guide on every day of the itinerary.';
const LONG =
  'Day 1 arrival and transfer to the hotel. Day 2 guided walk through the old town, lunch in a ' +
  'family-run tasca and an afternoon at leisure. Day 3 train along the river to the wine ' +
  'country, tasting at two quintas and dinner overlooking the terraces. Day 4 departure.';

/** Unique per tenant by construction (the API draws random codes and checks them one by one). */
function tripNumber(index: number): string {
  let code = '';
  let n = index;
  for (let i = 0; i < 6; i++) {
    code = CROCKFORD[n % 32] + code;
    n = Math.floor(n / 32);
  }
  return `TR-${code}`;
}

function calendarDay(index: number): string {
  const date = new Date(Date.UTC(2027, 0, 1) + (index % 700) * 86_400_000);
  return date.toISOString();
}

export async function seedTenant(
  env: Record<string, string>,
  trips: number,
  slug = 'bench',
): Promise<SeededTenant> {
  const started = performance.now();
  const config = loadConfig({ ...env, LOG_LEVEL: 'silent' });
  const runtime = await createRuntime(config, { logger: pino({ level: 'silent' }) });
  try {
    const { services, database } = runtime;
    const tenant = await services.tenants.create({
      name: 'Bench Tours',
      slug,
      tier: 'enterprise',
    });
    const lisbon = await services.library.create(tenant.id, 'cities', {
      name: 'Lisbon',
      countryIso: 'PT',
    });
    const porto = await services.library.create(tenant.id, 'cities', {
      name: 'Porto',
      countryIso: 'PT',
    });
    const minted = await services.tokens.mint(tenant.id, { scopes: ['*'], name: 'bench' });

    const now = new Date().toISOString();
    let index = 0;
    while (index < trips) {
      const transactionEnd = Math.min(trips, index + TRANSACTION_ROWS);
      await database.withTransaction(async () => {
        while (index < transactionEnd) {
          const batchEnd = Math.min(transactionEnd, index + BATCH_ROWS);
          const rows: Insertable<TripsTable>[] = [];
          for (; index < batchEnd; index++) {
            const days = 3 + (index % 12);
            rows.push({
              id: newId('trp'),
              tenantId: tenant.id,
              tripNumber: tripNumber(index),
              title: `${TITLES[index % TITLES.length]} in ${days} days #${index + 1}`,
              status: index % 7 === 0 ? 'active' : TRIP_STATUSES[0],
              tripMode: 'tailor_made',
              dateMode: index % 2 === 0 ? 'range_based' : 'departure_based',
              publicSlug: null,
              publishedAt: null,
              unpublishedAt: null,
              startDate: calendarDay(index),
              endDate: index % 2 === 0 ? calendarDay(index + days - 1) : null,
              daysCount: days,
              startCityId: lisbon.id,
              endCityId: index % 3 === 0 ? lisbon.id : porto.id,
              transportMode: index % 4 === 0 ? 'outsourced' : 'own_fleet',
              pricingDisplayMode: 'per_person',
              shortDescription: SHORT,
              longDescription: index % 3 === 0 ? LONG : null,
              clientId: null,
              notes: index % 5 === 0 ? 'Prefers boutique hotels.' : null,
              version: 1,
              createdBy: minted.token.id,
              createdAt: now,
              updatedAt: now,
            });
          }
          await database.db.insertInto('trips').values(rows).execute();
        }
      });
    }
    if (database.dialect === 'postgres') {
      // Steady state, as on a live database: planner statistics and the visibility map in place
      // (autovacuum would otherwise wake up for the bulk load in the middle of a measurement), and
      // the load's dirty pages written out now rather than by a checkpoint during a measurement.
      await sql`vacuum analyze`.execute(database.db);
      await sql`checkpoint`.execute(database.db).catch(() => undefined);
    }

    // Positions come from the database's own order (what the API's keyset pages walk).
    const middle = Math.max(0, Math.floor(trips / 2) - 1);
    const before = await database.db
      .selectFrom('trips')
      .select('id')
      .where('tenantId', '=', tenant.id)
      .orderBy('id')
      .limit(1)
      .offset(middle)
      .executeTakeFirstOrThrow();
    const tripId = before.id;
    return {
      tenantId: tenant.id,
      token: minted.value,
      trips,
      tripId,
      middleCursor: encodeCursor('trips', before.id),
      cityIds: [lisbon.id, porto.id],
      seedMs: performance.now() - started,
    };
  } finally {
    await runtime.close();
  }
}
