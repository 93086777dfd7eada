import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { changesBetween, resourceOfEvent } from '../src/domain/change-events.ts';
import { SUBSCRIBABLE_EVENT_TYPES } from '../src/domain/states.ts';
import { startWorker } from '../src/start-worker.ts';
import {
  ADMIN_TOKEN,
  BACKENDS,
  createWebhookTestContext,
  type TestContext,
} from './helpers/context.ts';
import { createSubscription, createTenant, type TenantFixture } from './helpers/fixtures.ts';
import { bodiesBySequence, HttpsReceiver } from './helpers/https-receiver.ts';
import { type ChildService, callService, startTourops } from './helpers/processes.ts';

// Every change decided under its row's lock: writers racing on the same trips, bookings, payments
// and clients over every write route, through two `tourops serve` processes on one database. The
// ledger of one subscription to every type then holds each change as its difference from the
// object's previous announced state, times that never go backwards, a replica built from
// `changes` alone that equals the reads, and one deposit per booking. RACES_SEED replays a run.

const WRITERS = 10;
type Row = Record<string, unknown> & { id: string };
interface Body {
  type: string;
  sequence: number;
  data: { object?: Row; changes?: Record<string, { before: unknown; after: unknown }> };
}

/** The write routes by the object they race on (a creation races on its parent, or on none). */
const ROUTES = {
  trip: ['patchTrip', 'publish', 'unpublish', 'tripStatus', 'createBooking'],
  booking: ['bookingMove', 'bookingMove', 'createPayment'],
  payment: ['paymentMove'],
  client: ['archive', 'unarchive'],
  none: ['createTrip', 'createClient', 'createClientAdmin'],
} as const;
type Kind = keyof typeof ROUTES;
const ROUNDS = 16;
/** Writes each writer makes in a round, one after another, beside the others'. */
const WRITES_A_ROUND = 8;
// Targets that keep the objects moving (a final state would end the race on it).
const TRIP_TARGETS = ['active', 'sent', 'accepted', 'rejected'];
const BOOKING_TARGETS = ['deposit_paid', 'confirmed', 'disputed', 'confirmed', 'disputed'];
const PAYMENT_TARGETS = ['scheduled', 'processing', 'failed'];

for (const backend of BACKENDS) {
  describe(`racing writers, two API processes (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let receiver: HttpsReceiver;
    let worker: ReturnType<typeof startWorker> | null = null;
    let servers: ChildService[] = [];
    let subscriptionId: string;

    before(async () => {
      ctx = await createWebhookTestContext(backend);
      tenant = await createTenant(ctx, { tier: 'enterprise' });
      receiver = await HttpsReceiver.start();
      const events = SUBSCRIBABLE_EVENT_TYPES.filter((type) => resourceOfEvent(type) !== null);
      subscriptionId = (await createSubscription(ctx, tenant, receiver.url('/races'), { events }))
        .data.id;
      const env = {
        ...ctx.env,
        ADMIN_API_TOKEN: ADMIN_TOKEN,
        RATE_LIMIT_BURST_PER_SEC: '1000000',
        RATE_LIMIT_PER_MIN: '100000000',
        RATE_LIMIT_IP_PER_MIN: '100000000',
      };
      servers = await Promise.all([1, 2].map(() => startTourops(['serve', '--no-worker'], env)));
    });
    after(async () => {
      await Promise.all(servers.map((server) => server.stop()));
      await worker?.stop();
      await receiver.close();
      await ctx.close();
    });

    it(`${WRITERS} writers, ${ROUNDS} rounds of ${WRITES_A_ROUND} writes on one object: each change as made`, async (t) => {
      const seed = Number(process.env.RACES_SEED ?? Date.now() % 1e9);
      t.diagnostic(`RACES_SEED=${seed}`);
      let turn = 0;
      // Some rounds through one process, some through both in turn: races within a process and
      // across processes go differently.
      let processes = servers.length;
      /** A write through either server; its body, or null for a refusal the race allows. */
      const write = async (method: string, path: string, body?: unknown): Promise<Row | null> => {
        const server = servers[turn++ % processes];
        const token = path.startsWith('/admin/') ? ADMIN_TOKEN : tenant.token;
        const answer = await callService(server, method, path, token, body ?? {});
        if (answer.status === 409 || answer.status === 422) {
          // A move from a state another writer left, a booking of a trip just unpublished.
          const problem = JSON.parse(answer.text);
          assert.ok(
            problem.code === 'invalid_transition' || problem.errors?.tripId,
            `${method} ${path}: ${answer.text}`,
          );
          return null;
        }
        assert.ok(answer.status < 300, `${method} ${path}: ${answer.status} ${answer.text}`);
        return JSON.parse(answer.text).data as Row;
      };
      const tripBody = (n: number) => ({
        title: `Race ${n}`,
        startDate: '2027-05-01',
        endDate: '2027-05-06',
        daysCount: 6,
        startCityId: tenant.cityIds[0],
        endCityId: tenant.cityIds[1],
      });
      const ids = {
        trip: [] as string[],
        booking: [] as string[],
        payment: [] as string[],
        client: [] as string[],
      };
      for (let n = 0; n < 2; n++) {
        const trip = (await write('POST', '/api/v1/trips', tripBody(n))) as Row;
        ids.trip.push(trip.id);
        await write('POST', `/admin/v1/trips/${trip.id}/publish`);
        const booking = (await write('POST', '/admin/v1/bookings', {
          tripId: trip.id,
          totalRetailCents: 100_000,
          currency: 'EUR',
          travelerName: 'Ana Lima',
          travelerEmail: 'ana@example.com',
        })) as Row;
        ids.booking.push(booking.id);
        const client = (await write('POST', '/api/v1/clients', {
          kind: 'individual',
          displayName: `R${n}`,
        })) as Row;
        ids.client.push(client.id);
      }
      const of = (list: readonly string[], n: number) => list[n % list.length];
      const payment = (n: number) => ({
        mode: 'installment',
        label: `Instalment ${n}`,
        amountCents: 1_000 + n,
        currency: 'EUR',
        kind: 'card',
      });
      const created = (list: string[]) => (row: Row | null) => {
        if (row) list.push(row.id);
      };
      /** Each route's write on the object `id` (its kind's), with a writer's own number `n`. */
      const writes: Record<string, (id: string, n: number) => Promise<unknown>> = {
        patchTrip: (id, n) =>
          write(
            'PATCH',
            `/api/v1/trips/${id}`,
            [{ title: `T${n}` }, { daysCount: 1 + (n % 9) }, { notes: `n${n}` }][n % 3],
          ),
        publish: (id) => write('POST', `/admin/v1/trips/${id}/publish`),
        unpublish: (id) => write('POST', `/admin/v1/trips/${id}/unpublish`),
        tripStatus: (id, n) =>
          write('POST', `/admin/v1/trips/${id}/status`, { status: of(TRIP_TARGETS, n) }),
        createBooking: (id, n) =>
          write('POST', '/admin/v1/bookings', {
            tripId: id,
            totalRetailCents: 50_000 + n,
            currency: 'EUR',
            travelerName: `Traveller ${n}`,
            travelerEmail: `t${n}@example.com`,
          }).then(created(ids.booking)),
        bookingMove: (id, n) =>
          write('POST', `/admin/v1/bookings/${id}/transition`, { to: of(BOOKING_TARGETS, n) }),
        createPayment: (id, n) =>
          write('POST', `/admin/v1/bookings/${id}/payments`, payment(n)).then(created(ids.payment)),
        paymentMove: (id, n) =>
          write('POST', `/admin/v1/payments/${id}/transition`, { to: of(PAYMENT_TARGETS, n) }),
        archive: (id) => write('POST', `/admin/v1/clients/${id}/archive`),
        unarchive: (id) => write('POST', `/admin/v1/clients/${id}/unarchive`),
        createTrip: (_id, n) => write('POST', '/api/v1/trips', tripBody(n)).then(created(ids.trip)),
        createClient: (_id, n) =>
          write('POST', '/api/v1/clients', { kind: 'company', displayName: `C${n}` }).then(
            created(ids.client),
          ),
        createClientAdmin: (_id, n) =>
          write('POST', `/admin/v1/tenants/${tenant.id}/clients`, {
            kind: 'individual',
            displayName: `A${n}`,
          }).then(created(ids.client)),
      };
      // Each round, every writer at once on one object (the newest of its kind half the time: a
      // booking's first payments race too), each by a route of that object's.
      const rounds = fc.sample(
        fc.tuple(
          // The moves of bookings and payments race most: twice as many of their rounds.
          fc.constantFrom<Kind>(
            'trip',
            'booking',
            'booking',
            'payment',
            'payment',
            'client',
            'none',
          ),
          fc.nat(1_000),
          fc.array(
            fc.array(fc.tuple(fc.nat(1_000), fc.nat(1_000)), {
              minLength: WRITES_A_ROUND,
              maxLength: WRITES_A_ROUND,
            }),
            { minLength: WRITERS, maxLength: WRITERS },
          ),
        ),
        { numRuns: ROUNDS, seed },
      );
      for (const [round, [kind, pick, writers]] of rounds.entries()) {
        processes = 1 + (round % servers.length);
        const list = kind === 'none' ? [''] : ids[kind];
        if (list.length === 0) continue;
        const id = pick % 2 === 0 ? (list.at(-1) as string) : of(list, pick);
        await Promise.all(
          writers.map(async (plan) => {
            for (const [route, n] of plan) await writes[of(ROUTES[kind], route)](id, n);
          }),
        );
      }

      // Delivered once the writes are done: a worker beside them takes turns with them on the
      // subscription's row, and the races would mostly not happen (each event's body and sequence
      // are decided at emit).
      worker = startWorker(ctx.runtime, { pollIntervalMs: 20 });
      // Every event of the subscription delivered: its sequence runs 1…last without a gap.
      const last = await ctx.runtime.repositories.webhooks.lastSequence(tenant.id, subscriptionId);
      const bodies = await bodiesBySequence<Body>(receiver, last);

      /** Each object's last announced event: its object and its changes. */
      const announced = new Map<string, { object: Row; changes: string }>();
      const replica = new Map<string, Row>();
      const wrong: string[] = [];
      for (let sequence = 1; sequence <= last; sequence++) {
        const body = bodies.get(sequence) as Body;
        const { object, changes } = body.data;
        assert.ok(object && changes, `${body.type} #${sequence} carries its object and changes`);
        const previous = announced.get(object.id);
        const said = JSON.stringify(changes);
        // The difference from the last announced state; or the second event of one change (a
        // dispute closed with a refund): the same object, the same changes.
        const expected = JSON.stringify(changesBetween(previous?.object ?? null, object));
        const secondOfOne =
          previous !== undefined &&
          JSON.stringify(previous.object) === JSON.stringify(object) &&
          previous.changes === said;
        if (said !== expected && !secondOfOne) {
          wrong.push(`#${sequence} ${body.type} ${object.id}: ${said} != ${expected}`);
        }
        const at = (row: Row | undefined) => (row?.updatedAt as string | null | undefined) ?? '';
        if (previous !== undefined && at(object) < at(previous.object)) {
          wrong.push(
            `#${sequence} ${body.type} ${object.id}: updatedAt ${at(object)} after ${at(previous.object)}`,
          );
        }
        announced.set(object.id, { object, changes: said });
        // The replica: the object at its creation, then only what each change says.
        const kept = replica.get(object.id);
        if (kept === undefined) replica.set(object.id, { ...object });
        else for (const [name, change] of Object.entries(changes)) kept[name] = change.after;
      }
      assert.deepEqual(wrong, [], `seed ${seed}: ${wrong.length} of ${last} events`);

      const read = async (path: string) => {
        const answer = await callService(servers[0], 'GET', path, tenant.token);
        assert.equal(answer.status, 200, answer.text);
        return JSON.parse(answer.text).data;
      };
      for (const id of ids.trip)
        assert.deepEqual(replica.get(id), await read(`/api/v1/trips/${id}`));
      for (const id of ids.client)
        assert.deepEqual(replica.get(id), await read(`/api/v1/clients/${id}`));
      for (const id of ids.booking) {
        assert.deepEqual(replica.get(id), await read(`/api/v1/bookings/${id}`));
        const payments: Row[] = [];
        for (let cursor = ''; ; ) {
          const answer = await callService(
            servers[0],
            'GET',
            `/api/v1/payments?bookingId=${id}&limit=100${cursor}`,
            tenant.token,
          );
          const page = JSON.parse(answer.text);
          payments.push(...page.data);
          if (!page.meta.hasMore) break;
          cursor = `&cursor=${page.meta.cursor}`;
        }
        for (const row of payments) assert.deepEqual(replica.get(row.id), row, `payment ${row.id}`);
        if (payments.length > 0) {
          assert.equal(
            payments.filter((row) => row.isDeposit).length,
            1,
            `booking ${id}: one deposit of ${payments.length} payments`,
          );
          assert.equal(payments[0].isDeposit, true, 'the first payment is the deposit');
        }
      }
      const moves = [...bodies.values()].filter((b) => /^(booking|dispute)\./.test(b.type)).length;
      t.diagnostic(`${last} events (${moves} of bookings), ${ids.payment.length} payments`);
    });
  });
}
