import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { sql } from 'kysely';
import pg from 'pg';
import { startWorker } from '../src/start-worker.ts';
import { BACKENDS, createWebhookTestContext, type TestContext } from './helpers/context.ts';
import { dump, formsOf } from './helpers/db-dump.ts';
import {
  clientUpdated,
  createTenant,
  createTrip,
  recordClientUpdates,
  type TenantFixture,
} from './helpers/fixtures.ts';
import { startTourops } from './helpers/processes.ts';
import { until } from './helpers/until.ts';
import { WORKER_READY } from './helpers/worker-processes.ts';

// An erasure beside the writes that race it: writers archive and unarchive the person's client
// and others', move their bookings and create clients with keys while it runs, and after it.
// Then the person is in no stored form anywhere, no write was lost (every change has its event,
// every row its last change's state), and the erasure was announced once. And two workers on one
// PostgreSQL: the one that froze past its lease loses the erasure to the other, which finishes it
// with the counts of a run never interrupted. ERASURE_RACES_SEED replays a run.

type Row = Record<string, unknown>;
interface Person {
  name: string;
  email: string;
  phone: string;
  clientId: string;
  bookingId: string;
}

const WRITERS = 6;
/** Writes each writer makes after the erasure is done (they also write all through it). */
const WRITES_AFTER = 5;
/** Events recorded about the people before the erasure, so that it takes many batches. */
const HISTORY = 3_000;
const BOOKING_TARGETS = ['confirmed', 'disputed', 'confirmed', 'disputed'];

for (const backend of BACKENDS) {
  describe(`erasure under racing writers (${backend})`, () => {
    let ctx: TestContext;
    let worker: ReturnType<typeof startWorker>;

    before(async () => {
      ctx = await createWebhookTestContext(backend);
      worker = startWorker(ctx.runtime, { pollIntervalMs: 20, erasures: { pollMs: 20 } });
    });
    after(async () => {
      await worker.stop();
      await ctx.close();
    });

    /** A tenant with four people, each a client and a booking's traveller, and their history. */
    const seedPeople = async (): Promise<{ tenant: TenantFixture; people: Person[] }> => {
      const tenant = await createTenant(ctx, { tier: 'enterprise' });
      const tripId = (await createTrip(ctx, tenant)).id as string;
      await ctx.admin('POST', `/admin/v1/trips/${tripId}/publish`);
      const people: Person[] = [];
      for (let i = 0; i < 4; i++) {
        const tag = randomUUID().slice(0, 8);
        const person = {
          name: `Race ${tag} Person${i}`,
          email: `race.${tag}.${i}@example.test`,
          phone: `+43 660 ${tag.replace(/\D/g, '3').slice(0, 7)}${i}`,
        };
        const client = await ctx.api('POST', '/api/v1/clients', {
          token: tenant.token,
          body: {
            kind: 'individual',
            displayName: person.name,
            email: person.email,
            phone: person.phone,
          },
        });
        assert.equal(client.statusCode, 201, client.body);
        const booking = await ctx.admin<{ data: Row }>('POST', '/admin/v1/bookings', {
          tripId,
          totalRetailCents: 20_000 + i,
          currency: 'EUR',
          travelerName: person.name,
          travelerEmail: person.email,
        });
        const bookingId = booking.data.id as string;
        await ctx.admin('POST', `/admin/v1/bookings/${bookingId}/transition`, {
          to: 'deposit_paid',
        });
        people.push({ ...person, clientId: client.json().data.id, bookingId });
      }
      const { clients } = ctx.runtime.services;
      const made = await Promise.all(people.map((p) => clients.get(tenant.id, p.clientId)));
      await recordClientUpdates(ctx, tenant.id, made, HISTORY);
      return { tenant, people };
    };

    it('leaves the person nowhere, loses no write, and announces once', async (t) => {
      const seed = Number(process.env.ERASURE_RACES_SEED ?? Date.now() % 1e9);
      t.diagnostic(`ERASURE_RACES_SEED=${seed}`);
      for (let round = 0; round < 3; round++) {
        const { tenant, people } = await seedPeople();
        const [pick, ...picks] = fc.sample(fc.nat(people.length - 1), {
          numRuns: 1 + WRITERS * 500,
          seed: seed + round,
        });
        const person = people[pick];
        const others = people.filter((p) => p !== person);
        const needles = [person.name, person.email, person.phone].flatMap(formsOf);
        const held = (text: string) => needles.some((n) => text.includes(n));

        const lastSeq = async (type?: string) => {
          let query = ctx.runtime.database.db
            .selectFrom('events')
            .select((eb) => eb.fn.max('seq').as('seq'))
            .where('tenantId', '=', tenant.id);
          if (type) query = query.where('type', '=', type);
          return Number((await query.executeTakeFirstOrThrow()).seq);
        };
        const requestedAt = await lastSeq();
        const asked = await ctx.api('POST', '/api/v1/erasures', {
          token: tenant.token,
          body: { email: person.email },
        });
        assert.equal(asked.statusCode, 202, asked.body);
        const erasureId = asked.json().data.id as string;
        let done = false;
        let drawn = 0;
        const draw = () => people[picks[drawn++ % picks.length]];
        const created: string[] = [];
        const writer = async (w: number) => {
          for (let n = 0, after = 0; after < WRITES_AFTER; n++) {
            if (done) after += 1;
            const target = draw();
            const op = (w + n) % 3;
            if (op === 0) {
              const action = (w + n) % 2 === 0 ? 'archive' : 'unarchive';
              await ctx.admin('POST', `/admin/v1/clients/${target.clientId}/${action}`);
            } else if (op === 1) {
              const to = BOOKING_TARGETS[(w + n) % BOOKING_TARGETS.length];
              const moved = await ctx.adminRequest(
                'POST',
                `/admin/v1/bookings/${target.bookingId}/transition`,
                { to },
              );
              // Refused when the booking is already there: no change, no event.
              assert.ok([200, 409].includes(moved.statusCode), moved.body);
            } else {
              const email = `new.${w}.${n}.${randomUUID().slice(0, 6)}@example.test`;
              const made = await ctx.api('POST', '/api/v1/clients', {
                token: tenant.token,
                body: { kind: 'individual', displayName: `New ${w}-${n}`, email },
                headers: { 'idempotency-key': randomUUID() },
              });
              assert.equal(made.statusCode, 201, made.body);
              created.push(email);
            }
          }
        };
        const writing = Promise.all(Array.from({ length: WRITERS }, (_, w) => writer(w)));
        const erasure = await until(async () => {
          const shown = await ctx.api('GET', `/api/v1/erasures/${erasureId}`, {
            token: tenant.token,
          });
          const data = shown.json().data as Row;
          return data.status === 'done' ? data : undefined;
        }, 'the erasure done');
        done = true;
        await writing;

        // The person is in no stored form, in any table.
        for (const [table, rows] of await dump(ctx)) {
          for (const [key, text] of rows) assert.ok(!held(text), `${table} ${key} holds them`);
        }
        // Announced once, naming the client and the booking found by the address.
        const announced = await ctx.runtime.database.db
          .selectFrom('events')
          .select('data')
          .where('tenantId', '=', tenant.id)
          .where('type', '=', 'personal_data.erased')
          .execute();
        assert.deepEqual(
          announced.map((row) => JSON.parse(row.data)),
          [{ erasureId, clientIds: [person.clientId], bookingIds: [person.bookingId] }],
        );
        // The race happened: changes of the person's rows came between the request and the end.
        const announcedAt = await lastSeq('personal_data.erased');
        const between = await ctx.runtime.database.db
          .selectFrom('events')
          .select('data')
          .where('tenantId', '=', tenant.id)
          .where('seq', '>', requestedAt)
          .where('seq', '<', announcedAt)
          .execute();
        assert.ok(
          between.some((row) => {
            const data = JSON.parse(row.data) as Row;
            return data.clientId === person.clientId || data.bookingId === person.bookingId;
          }),
          'a write raced the erasure',
        );
        assert.equal((erasure.redacted as Row).clients, 1);
        assert.equal((erasure.redacted as Row).bookings, 1);
        const read = async (path: string) =>
          (await ctx.api('GET', path, { token: tenant.token })).json().data as Row;
        // No write lost: each client and booking is in the state of its last event, and
        // everyone else's data is whole.
        for (const p of people) {
          const client = await read(`/api/v1/clients/${p.clientId}`);
          const lastClient = await lastObject(ctx, tenant.id, ['client'], 'clientId', p.clientId);
          assert.equal(client.archivedAt, lastClient.archivedAt, `${p.clientId} archived state`);
          const booking = await read(`/api/v1/bookings/${p.bookingId}`);
          const lastBooking = await lastObject(
            ctx,
            tenant.id,
            ['booking', 'dispute'],
            'bookingId',
            p.bookingId,
          );
          assert.equal(booking.status, lastBooking.status, `${p.bookingId} status`);
          if (p === person) {
            assert.equal(client.email, null);
            assert.equal(booking.travelerEmail, null);
          }
        }
        for (const other of others) {
          const client = await read(`/api/v1/clients/${other.clientId}`);
          assert.deepEqual([client.email, client.phone], [other.email, other.phone]);
          const booking = await read(`/api/v1/bookings/${other.bookingId}`);
          assert.deepEqual(
            [booking.travelerName, booking.travelerEmail],
            [other.name, other.email],
          );
        }
        const text = (await dump(ctx)).get('events') as Map<string, string>;
        const all = [...text.values()].join('\n');
        for (const email of [...created, ...others.map((o) => o.email)]) {
          assert.ok(all.includes(email), `${email} kept`);
        }
      }
    });
  });
}

/** The object of the last event (by `seq`) about one client or booking. */
async function lastObject(
  ctx: TestContext,
  tenantId: string,
  families: string[],
  member: 'clientId' | 'bookingId',
  id: string,
): Promise<Row> {
  const rows = await ctx.runtime.database.db
    .selectFrom('events')
    .select(['seq', 'data'])
    .where('tenantId', '=', tenantId)
    .where((eb) => eb.or(families.map((family) => eb('type', 'like', `${family}.%`))))
    .orderBy('seq', 'desc')
    .execute();
  for (const row of rows) {
    const data = JSON.parse(row.data) as Row;
    if (data[member] === id && data.object) return data.object as Row;
  }
  throw new Error(`no event about ${id}`);
}

if (BACKENDS.includes('postgres')) {
  describe('two workers on one PostgreSQL, one frozen past its lease', () => {
    let ctx: TestContext;

    before(async () => {
      ctx = await createWebhookTestContext('postgres');
    });
    after(() => ctx.close());

    /** A tenant whose first client has many events, and that client's id. */
    const seedClient = async () => {
      const tenant = await createTenant(ctx, { tier: 'enterprise' });
      const { clients } = ctx.runtime.services;
      const made: Awaited<ReturnType<typeof clients.create>>[] = [];
      for (let i = 0; i < 3; i++) {
        made.push(
          await clients.create(tenant.id, {
            kind: 'individual',
            displayName: `Lease Person ${i}`,
            email: `lease${i}.${tenant.id.slice(-6).toLowerCase()}@example.test`,
          }),
        );
      }
      await recordClientUpdates(ctx, tenant.id, made, 10_000);
      return { tenant, clientId: made[0].id as string, email: made[0].email as string };
    };
    const erasureRow = (id: string) =>
      ctx.runtime.database.db
        .selectFrom('erasures')
        .selectAll()
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
    /** Whether a session of the test database is inside a transaction now. */
    const inTransaction = async () => {
      const { rows } = await sql<{ n: string }>`
        select count(*) as n from pg_stat_activity
        where datname = current_database() and state like 'idle in transaction%'`.execute(
        ctx.runtime.database.db,
      );
      return Number(rows[0].n) > 0;
    };

    it('waits for a change to the person still in flight, whose event has an earlier seq', async () => {
      const tenant = await createTenant(ctx, { tier: 'enterprise' });
      const { clients, erasures } = ctx.runtime.services;
      const email = `in-flight.${tenant.id.slice(-6).toLowerCase()}@example.test`;
      const client = await clients.create(tenant.id, {
        kind: 'individual',
        displayName: 'In Flight',
        email,
      });
      const clientId = client.id;
      // A writer's transaction as every change makes it: the row locked, then its event, whose
      // seq is taken now and committed later.
      const writer = new pg.Client({ connectionString: ctx.env.DATABASE_URL });
      await writer.connect();
      try {
        await writer.query('begin');
        await writer.query('select id from clients where id = $1 for update', [clientId]);
        const late = randomUUID();
        const data = clientUpdated(client);
        await writer.query(
          `insert into events (id, tenant_id, type, data, is_test, created_at)
           values ($1, $2, 'client.updated', $3, 0, $4)`,
          [late, tenant.id, JSON.stringify(data), new Date().toISOString()],
        );
        // A later event, committed at once: the erasure's first batch reads past the one above.
        const other = await clients.create(tenant.id, { kind: 'individual', displayName: 'Later' });
        await recordClientUpdates(ctx, tenant.id, [other], 1);
        const erasure = await erasures.create(tenant.id, { clientId });
        const running = (async () => {
          while (await erasures.runNext('runner'));
        })();
        await new Promise((resolve) => setTimeout(resolve, 300));
        await writer.query('commit');
        await running;
        assert.equal((await erasures.get(tenant.id, erasure.id)).status, 'done');
        const stored = await ctx.runtime.database.db
          .selectFrom('events')
          .select('data')
          .where('id', '=', late)
          .executeTakeFirstOrThrow();
        assert.ok(!stored.data.includes(email), 'the late event is redacted');
      } finally {
        await writer.end();
      }
    });

    it('hands the erasure over once: one announcement, the counts of an uninterrupted run', async () => {
      const whole = await seedClient();
      const raced = await seedClient();
      const { erasures } = ctx.runtime.services;
      const first = await erasures.create(whole.tenant.id, { clientId: whole.clientId });
      while (await erasures.runNext('uninterrupted'));
      const expected = await erasures.get(whole.tenant.id, first.id);

      const second = await erasures.create(raced.tenant.id, { clientId: raced.clientId });
      const frozen = await startTourops(['worker'], ctx.env, WORKER_READY);
      let other: Awaited<ReturnType<typeof startTourops>> | null = null;
      try {
        const leased = await until(async () => {
          const row = await erasureRow(second.id);
          return JSON.parse(row.cursor).seq > 0 ? row : undefined;
        }, 'the erasure part-way');
        // Frozen between two batches (in one, its row lock would hold the other off).
        for (;;) {
          frozen.child.kill('SIGSTOP');
          if (!(await inTransaction())) break;
          frozen.child.kill('SIGCONT');
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
        other = await startTourops(['worker'], ctx.env, WORKER_READY);
        await until(async () => {
          const row = await erasureRow(second.id);
          return row.leaseToken !== leased.leaseToken ? row : undefined;
        }, 'taken over once the lease ran out');
        frozen.child.kill('SIGCONT');
        const done = await until(async () => {
          const erasure = await erasures.get(raced.tenant.id, second.id);
          return erasure.status === 'done' ? erasure : undefined;
        }, 'the erasure done');
        assert.deepEqual(done.redacted, expected.redacted);
      } finally {
        frozen.child.kill('SIGCONT');
        await frozen.stop();
        await other?.stop();
      }
      const announced = await ctx.runtime.database.db
        .selectFrom('events')
        .select('data')
        .where('tenantId', '=', raced.tenant.id)
        .where('type', '=', 'personal_data.erased')
        .execute();
      assert.equal(announced.length, 1);
      const left = await ctx.runtime.database.db
        .selectFrom('events')
        .select('data')
        .where('tenantId', '=', raced.tenant.id)
        .execute();
      assert.ok(!left.some((row) => row.data.includes(raced.email)));
    });
  });
}
