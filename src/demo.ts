import { SCOPES } from './domain/plans.ts';
import type { Runtime } from './runtime.ts';
import type { CreateTripInput } from './services/trips-service.ts';

export interface DemoResult {
  tenantId: string;
  tenantSlug: string;
  token: string;
}

const CITIES = [
  ['Lisbon', 'PT'],
  ['Porto', 'PT'],
  ['Faro', 'PT'],
  ['Seville', 'ES'],
  ['Granada', 'ES'],
] as const;

/**
 * A realistic demo tenant built through the same services as the API and admin API, so its
 * events land in the outbox like any others.
 */
export async function seedDemo(runtime: Runtime, slug = 'demo'): Promise<DemoResult> {
  const { services } = runtime;
  // Refuses a taken slug (409 slug_taken) before anything is written.
  const tenant = await services.tenants.create({ name: 'Demo Tours', slug, tier: 'pro' });
  const owner = await services.tenants.addMember(tenant.id, {
    email: 'owner@demo-tours.example',
    role: 'owner',
  });
  await services.tenants.addMember(tenant.id, { email: 'ops@demo-tours.example', role: 'admin' });

  const cities = [];
  for (const [name, countryIso] of CITIES) {
    cities.push(await services.library.create(tenant.id, 'cities', { name, countryIso }));
  }
  const [lisbon, porto, faro, seville, granada] = cities;
  await services.library.create(tenant.id, 'hotels', {
    name: 'Casa do Rio',
    cityId: lisbon.id,
    stars: 4,
    address: 'Rua da Prata 12, Lisbon',
  });
  await services.library.create(tenant.id, 'hotels', {
    name: 'Hotel Ribeira',
    cityId: porto.id,
    stars: 3,
    address: 'Cais da Ribeira 8, Porto',
  });
  await services.library.create(tenant.id, 'hotels', {
    name: 'Palacio de los Naranjos',
    cityId: seville.id,
    stars: 5,
  });
  await services.library.create(tenant.id, 'activities', {
    name: 'Alfama walking tour',
    cityId: lisbon.id,
    durationMinutes: 180,
    description: 'Old town, fado houses and viewpoints.',
  });
  await services.library.create(tenant.id, 'activities', {
    name: 'Douro valley wine day',
    cityId: porto.id,
    durationMinutes: 540,
  });
  await services.library.create(tenant.id, 'activities', {
    name: 'Alhambra guided visit',
    cityId: granada.id,
    durationMinutes: 240,
  });
  await services.library.create(tenant.id, 'vehicles', {
    name: 'Mercedes Sprinter',
    kind: 'minibus',
    seats: 16,
  });
  await services.library.create(tenant.id, 'vehicles', {
    name: 'Toyota Proace',
    kind: 'van',
    seats: 8,
  });
  await services.library.create(tenant.id, 'guides', {
    name: 'Inês Carvalho',
    languages: ['pt', 'en', 'fr'],
    email: 'ines@demo-tours.example',
  });
  await services.library.create(tenant.id, 'guides', {
    name: 'Javier Ortega',
    languages: ['es', 'en'],
    phone: '+34 600 000 111',
  });

  const minted = await services.tokens.mint(tenant.id, {
    scopes: [...SCOPES],
    name: 'Demo token',
    createdBy: owner.id,
  });

  const anna = await services.clients.create(tenant.id, {
    kind: 'individual',
    displayName: 'Anna Schmidt',
    email: 'anna.schmidt@example.com',
    countryIso: 'DE',
    language: 'de',
    currency: 'EUR',
    tags: ['repeat', 'vip'],
  });
  await services.clients.create(tenant.id, {
    kind: 'company',
    displayName: 'Nordic Incentives AB',
    legalName: 'Nordic Incentives Aktiebolag',
    email: 'events@nordic-incentives.example',
    countryIso: 'SE',
    vatId: 'SE556000000001',
    currency: 'SEK',
  });
  const archived = await services.clients.create(tenant.id, {
    kind: 'individual',
    displayName: 'Tom Baker',
    email: 'tom@example.com',
    countryIso: 'GB',
  });
  await services.clients.setArchived(tenant.id, archived.id, true);

  const plans: CreateTripInput[] = [
    {
      title: 'Lisbon & Porto in 7 days',
      startDate: '2027-05-03',
      endDate: '2027-05-09',
      daysCount: 7,
      startCityId: lisbon.id,
      endCityId: porto.id,
      shortDescription: 'Two capitals of light, with a day in the Douro valley.',
    },
    {
      title: 'Algarve coast escape',
      startDate: '2027-06-14',
      daysCount: 5,
      startCityId: faro.id,
      endCityId: faro.id,
      pricingDisplayMode: 'per_couple',
    },
    {
      title: 'Andalusia classics',
      startDate: '2027-04-10',
      endDate: '2027-04-18',
      daysCount: 9,
      startCityId: seville.id,
      endCityId: granada.id,
      transportMode: 'outsourced',
    },
    {
      title: 'Schmidt family tailor-made',
      startDate: '2027-08-01',
      daysCount: 10,
      startCityId: lisbon.id,
      endCityId: seville.id,
      clientId: anna.id,
      notes: 'Prefers boutique hotels.',
    },
    {
      title: 'Porto long weekend',
      startDate: '2027-03-19',
      daysCount: 3,
      startCityId: porto.id,
      endCityId: porto.id,
      pricingDisplayMode: 'total_group',
    },
  ];
  const trips = [];
  for (const plan of plans) trips.push(await services.trips.create(tenant.id, owner.id, plan));
  await services.trips.setStatus(tenant.id, trips[0].id, 'active');
  await services.trips.setStatus(tenant.id, trips[2].id, 'active');
  await services.trips.publish(tenant.id, trips[0].id);
  await services.trips.publish(tenant.id, trips[2].id);

  const confirmed = await services.bookings.create(tenant.id, {
    tripId: trips[0].id,
    totalRetailCents: 289_000,
    currency: 'EUR',
    travelerName: 'Marie Dubois',
    travelerEmail: 'marie.dubois@example.com',
  });
  const deposit = await services.payments.create(tenant.id, confirmed.id, {
    mode: 'installment',
    label: 'Deposit 30%',
    amountCents: 86_700,
    currency: 'EUR',
    kind: 'card',
    paymentRail: 'card',
  });
  await services.payments.create(tenant.id, confirmed.id, {
    mode: 'installment',
    label: 'Balance',
    amountCents: 202_300,
    currency: 'EUR',
    kind: 'sepa_debit',
    paymentRail: 'bank',
    scheduledFor: '2027-04-03T09:00:00Z',
  });
  await services.payments.transition(tenant.id, deposit.id, 'processing');
  await services.payments.transition(tenant.id, deposit.id, 'succeeded');
  await services.bookings.transition(tenant.id, confirmed.id, 'deposit_paid');
  await services.bookings.transition(tenant.id, confirmed.id, 'confirmed');

  const pending = await services.bookings.create(tenant.id, {
    tripId: trips[2].id,
    totalRetailCents: 412_500,
    currency: 'EUR',
    travelerName: 'Lars Nilsson',
    travelerEmail: 'lars@example.com',
  });
  await services.payments.create(tenant.id, pending.id, {
    mode: 'full',
    label: 'Full payment',
    amountCents: 412_500,
    currency: 'EUR',
    kind: 'card',
    paymentRail: 'card',
  });

  return { tenantId: tenant.id, tenantSlug: slug, token: minted.value };
}

/** What to tell a person who just got the demo token: it is shown only once. */
export function demoInstructions(demo: DemoResult, baseUrl: string): string {
  return (
    `Demo tenant "${demo.tenantSlug}" created (${demo.tenantId}). Its token (shown only now, every scope):\n\n` +
    `  ${demo.token}\n\n` +
    `Try:\n  curl -s -H "Authorization: Bearer ${demo.token}" ${baseUrl}/api/v1/trips?limit=2\n`
  );
}

export async function seedDemoIfEmpty(runtime: Runtime): Promise<DemoResult | null> {
  if ((await runtime.services.tenants.count()) > 0) return null;
  return seedDemo(runtime);
}
