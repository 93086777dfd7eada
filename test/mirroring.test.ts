import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import fc from 'fast-check';
import { changesBetween } from '../src/domain/change-events.ts';
import { ERASED_BOOKING, ERASED_CLIENT } from '../src/domain/erasure.ts';
import {
  BOOKING_TRANSITIONS,
  EVENT_TYPES,
  PAYMENT_TRANSITIONS,
  SUBSCRIBABLE_EVENT_TYPES,
  TRIP_TRANSITIONS,
} from '../src/domain/states.ts';
import { startWorker } from '../src/start-worker.ts';
import { BACKENDS, createWebhookTestContext, type TestContext } from './helpers/context.ts';
import { createSubscription, createTenant, type TenantFixture } from './helpers/fixtures.ts';
import { bodiesBySequence, HttpsReceiver } from './helpers/https-receiver.ts';
import { eventually } from './helpers/until.ts';

// A tenant kept from its events alone: a random mix of writes over the public and admin APIs, one
// subscription to every type, and a replica that applies each event's `object` in sequence order.
// At the end the replica is what the API's reads show, and every `changes` is the difference
// between the object's consecutive states; every body holds to its schema in the event catalog.

const OPERATIONS = 300;
type Row = Record<string, unknown> & { id: string };
type Kind = 'trip' | 'booking' | 'client' | 'payment';
interface Body {
  id: string;
  type: string;
  sequence: number;
  data: { object?: Row; changes?: Record<string, { before: unknown; after: unknown }> };
}

/** The resource an event type is about, read from its name as a receiver would. */
const kindOf = (type: string): Kind | null => {
  const family = type.split('.')[0];
  if (family === 'dispute') return 'booking';
  return ['trip', 'booking', 'client', 'payment'].includes(family) ? (family as Kind) : null;
};

const ACTIONS = [
  'createTrip',
  'patchTrip',
  'publish',
  'unpublish',
  'tripStatus',
  'createBooking',
  'bookingMove',
  'createPayment',
  'paymentMove',
  'createClient',
  'archive',
  'unarchive',
] as const;

for (const backend of BACKENDS) {
  describe(`mirroring a tenant from its change events (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let receiver: HttpsReceiver;
    let worker: ReturnType<typeof startWorker>;
    let subscriptionId: string;

    before(async () => {
      ctx = await createWebhookTestContext(backend);
      tenant = await createTenant(ctx, { tier: 'enterprise' });
      receiver = await HttpsReceiver.start();
      const events = [
        ...SUBSCRIBABLE_EVENT_TYPES.filter((type) => kindOf(type) !== null),
        'personal_data.erased',
      ];
      const created = await createSubscription(ctx, tenant, receiver.url('/mirror'), { events });
      subscriptionId = created.data.id;
      worker = startWorker(ctx.runtime, { pollIntervalMs: 20, erasures: { pollMs: 20 } });
    });
    after(async () => {
      await worker.stop();
      await receiver.close();
      await ctx.close();
    });

    const api = async (method: 'GET' | 'POST' | 'PATCH', url: string, body?: unknown) => {
      const response = await ctx.api(method, url, { token: tenant.token, body });
      assert.ok(response.statusCode < 300, `${method} ${url}: ${response.body}`);
      return response.json().data as Row;
    };
    const admin = async (url: string, body?: unknown) =>
      (await ctx.admin<{ data: Row }>('POST', url, body)).data;

    it('lists every event type in the catalog, each example held to its own schema', async () => {
      const refused = await ctx.api('GET', '/api/v1/event-types', {});
      assert.equal(refused.statusCode, 401);
      const response = await ctx.api('GET', '/api/v1/event-types', { token: tenant.token });
      assert.equal(response.statusCode, 200);
      const entries = response.json().data as Array<{
        type: string;
        description: string;
        subscribable: boolean;
        schema: object;
        example: { data: Record<string, unknown> };
      }>;
      assert.deepEqual(
        entries.map((e) => e.type),
        [...EVENT_TYPES],
      );
      const ajv = addFormats.default(new Ajv2020.default({ strict: false }));
      for (const entry of entries) {
        assert.equal(entry.subscribable, entry.type !== 'webhook.test', entry.type);
        assert.ok(entry.description.length > 10, entry.type);
        const validate = ajv.compile(entry.schema);
        assert.ok(validate(entry.example), `${entry.type}: ${ajv.errorsText(validate.errors)}`);
        // Closed as emit checks it: a member no schema names is refused.
        assert.equal(validate({ ...entry.example, extra: 1 }), false, entry.type);
        if (kindOf(entry.type) !== null) {
          assert.ok('object' in entry.example.data && 'changes' in entry.example.data, entry.type);
        }
      }
    });

    it(`replicates every object from ${OPERATIONS} random writes, and each change is its difference`, async (t) => {
      // Picks a write can refuse to make (no booking yet to move, a final status) are passed
      // over: enough are drawn for OPERATIONS writes. MIRROR_SEED replays a run.
      const seed = Number(process.env.MIRROR_SEED ?? Date.now() % 1e9);
      t.diagnostic(`MIRROR_SEED=${seed}`);
      const picks = fc.sample(fc.tuple(fc.constantFrom(...ACTIONS), fc.nat(1_000), fc.nat(1_000)), {
        numRuns: OPERATIONS * 4,
        seed,
      });
      const ids: Record<Kind, string[]> = { trip: [], booking: [], client: [], payment: [] };
      const state = new Map<string, Row>();
      const pick = (kind: Kind, n: number) => ids[kind][n % ids[kind].length];
      const next = (table: Record<string, readonly string[]>, from: string, n: number) =>
        table[from]?.length ? table[from][n % table[from].length] : null;
      const keep = (kind: Kind, row: Row) => {
        if (!state.has(row.id)) ids[kind].push(row.id);
        state.set(row.id, row);
      };
      let writes = 0;
      for (const [action, a, b] of picks) {
        if (writes === OPERATIONS) break;
        const before = writes;
        writes += 1;
        if (action === 'createTrip' || ids.trip.length === 0) {
          keep(
            'trip',
            await api('POST', '/api/v1/trips', {
              title: `Trip ${a}`,
              startDate: '2027-05-01',
              endDate: '2027-05-06',
              daysCount: 6,
              startCityId: tenant.cityIds[0],
              endCityId: tenant.cityIds[1],
            }),
          );
        } else if (action === 'patchTrip') {
          const patch = [{ title: `Renamed ${b}` }, { daysCount: 1 + (b % 9) }, { notes: `n${b}` }];
          keep('trip', await api('PATCH', `/api/v1/trips/${pick('trip', a)}`, patch[b % 3]));
        } else if (action === 'publish' || action === 'unpublish') {
          keep('trip', await admin(`/admin/v1/trips/${pick('trip', a)}/${action}`));
        } else if (action === 'tripStatus') {
          const trip = state.get(pick('trip', a)) as Row;
          const to = next(TRIP_TRANSITIONS, trip.status as string, b);
          if (to === null) writes = before;
          else keep('trip', await admin(`/admin/v1/trips/${trip.id}/status`, { status: to }));
        } else if (action === 'createBooking') {
          const published = ids.trip.filter(
            (id) => state.get(id)?.publishedAt && !state.get(id)?.unpublishedAt,
          );
          if (published.length === 0) writes = before;
          else {
            keep(
              'booking',
              await admin('/admin/v1/bookings', {
                tripId: published[a % published.length],
                totalRetailCents: 10_000 + b,
                currency: 'EUR',
                travelerName: `Traveller ${b}`,
                travelerEmail: `t${b}@example.com`,
              }),
            );
          }
        } else if (action === 'bookingMove' || action === 'createPayment') {
          if (ids.booking.length === 0) writes = before;
          else if (action === 'bookingMove') {
            const booking = state.get(pick('booking', a)) as Row;
            const to = next(BOOKING_TRANSITIONS, booking.status as string, b);
            if (to === null) writes = before;
            else {
              keep('booking', await admin(`/admin/v1/bookings/${booking.id}/transition`, { to }));
            }
          } else {
            keep(
              'payment',
              await admin(`/admin/v1/bookings/${pick('booking', a)}/payments`, {
                mode: 'installment',
                label: `Instalment ${b}`,
                amountCents: 1_000 + b,
                currency: 'EUR',
                kind: 'balance',
              }),
            );
          }
        } else if (action === 'paymentMove') {
          if (ids.payment.length === 0) writes = before;
          else {
            const payment = state.get(pick('payment', a)) as Row;
            const to = next(PAYMENT_TRANSITIONS, payment.status as string, b);
            if (to === null) writes = before;
            else {
              keep('payment', await admin(`/admin/v1/payments/${payment.id}/transition`, { to }));
            }
          }
        } else if (action === 'createClient') {
          keep(
            'client',
            await api('POST', '/api/v1/clients', { kind: 'company', displayName: `C${a}` }),
          );
        } else {
          if (ids.client.length === 0) writes = before;
          else keep('client', await admin(`/admin/v1/clients/${pick('client', a)}/${action}`));
        }
      }
      assert.equal(writes, OPERATIONS, `seed ${seed}: ${writes} writes`);

      // One client and one booking erased: the replica follows from `personal_data.erased`.
      const erased = [
        ...(ids.client.length > 0 ? [{ clientId: pick('client', seed) }] : []),
        ...(ids.booking.length > 0 ? [{ bookingId: pick('booking', seed) }] : []),
      ];
      for (const subject of erased) {
        const made = await api('POST', '/api/v1/erasures', subject);
        await eventually(
          async () => (await api('GET', `/api/v1/erasures/${made.id}`)).status === 'done',
          'the erasure done',
        );
      }

      // Every event of the subscription delivered: its sequence runs 1…last without a gap.
      const last = await ctx.runtime.repositories.webhooks.lastSequence(tenant.id, subscriptionId);
      const bodies = await bodiesBySequence<Body>(receiver, last);

      const catalog = (await ctx.api('GET', '/api/v1/event-types', { token: tenant.token })).json()
        .data as Array<{ type: string; schema: object }>;
      const ajv = addFormats.default(new Ajv2020.default({ strict: false }));
      const validators = new Map(catalog.map((entry) => [entry.type, ajv.compile(entry.schema)]));

      const replica = new Map<string, Row>();
      const states = new Map<string, Row[]>();
      for (let sequence = 1; sequence <= last; sequence++) {
        const body = bodies.get(sequence) as Body;
        const validate = validators.get(body.type);
        assert.ok(validate?.(body), `${body.type}: ${ajv.errorsText(validate?.errors)}`);
        if (body.type === 'personal_data.erased') {
          // A receiver's own copies follow the erasure: the documented placeholders, by id.
          const { clientIds, bookingIds } = body.data as unknown as Record<string, string[]>;
          for (const id of clientIds) Object.assign(replica.get(id) as Row, ERASED_CLIENT);
          for (const id of bookingIds) Object.assign(replica.get(id) as Row, ERASED_BOOKING);
          continue;
        }
        const { object, changes } = body.data;
        assert.ok(object && changes, `${body.type} carries its object and changes`);
        const history = states.get(object.id) ?? [];
        const previous = history.at(-1) ?? null;
        // Two events of one change (a dispute closed with a refund) share the change.
        const same = previous !== null && JSON.stringify(previous) === JSON.stringify(object);
        const from = same ? (history.at(-2) ?? null) : previous;
        assert.deepEqual(changes, changesBetween(from, object), `${body.type} #${sequence}`);
        if (!same) history.push(object);
        states.set(object.id, history);
        replica.set(object.id, object);
      }

      assert.equal(replica.size, state.size, 'every object written has its events');
      for (const id of ids.trip)
        assert.deepEqual(replica.get(id), await api('GET', `/api/v1/trips/${id}`));
      for (const id of ids.booking) {
        assert.deepEqual(replica.get(id), await api('GET', `/api/v1/bookings/${id}`));
        const page = await ctx.api('GET', `/api/v1/payments?bookingId=${id}&limit=100`, {
          token: tenant.token,
        });
        for (const payment of page.json().data as Row[]) {
          assert.deepEqual(replica.get(payment.id), payment, `payment ${payment.id}`);
        }
      }
      for (const id of ids.client)
        assert.deepEqual(replica.get(id), await api('GET', `/api/v1/clients/${id}`));
    });
  });
}
