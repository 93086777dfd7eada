import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { SUBSCRIBABLE_EVENT_TYPES } from '../src/domain/states.ts';
import { startWorker } from '../src/start-worker.ts';
import { RABBIT_PORT, RabbitQueue } from './helpers/brokers.ts';
import { BACKENDS, createWebhookTestContext, type TestContext } from './helpers/context.ts';
import { dump, formsOf } from './helpers/db-dump.ts';
import { deliveryRows } from './helpers/delivery-rows.ts';
import {
  createSubscription,
  createTenant,
  createTrip,
  recordClientUpdates,
  type TenantFixture,
} from './helpers/fixtures.ts';
import { HttpsReceiver } from './helpers/https-receiver.ts';
import { captureLogs } from './helpers/log-capture.ts';
import { PortalClient, pathOf } from './helpers/portal-client.ts';
import { startTourops } from './helpers/processes.ts';
import { eventually, until } from './helpers/until.ts';
import { WORKER_READY } from './helpers/worker-processes.ts';

// One person erased from a tenant whose events went to full and thin subscriptions (receivers
// that echo the request into their answer, plainly and JSON-escaped, and a RabbitMQ exchange),
// with keyed writes, retries and redeliveries: afterwards no text column of any table, no API
// read, no portal page and no log line holds that person's name, e-mail or phone in any form,
// and every other row is as before.

type Row = Record<string, unknown>;
type Mode = 'client' | 'booking' | 'email';
interface Person {
  name: string;
  email: string;
  phone: string;
  role: 'client' | 'traveller' | 'both';
  clientId?: string;
  bookingIds: string[];
}

/** Tables whose rows move by themselves (counters, heartbeats, claims, the erasure's own). */
const MOVING = new Set([
  'webhook_subscriptions',
  'webhook_workers',
  'webhook_pacing',
  'webhook_deliveries',
  'webhook_sequences',
  'rate_limits',
  'erasures',
  'tenants',
  'api_tokens',
  'portal_sessions',
  'sqlite_sequence',
]);

for (const backend of BACKENDS) {
  describe(`erasure (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let receiver: HttpsReceiver;
    let rabbit: RabbitQueue;
    let worker: ReturnType<typeof startWorker>;
    let tries = 0;
    /** Every log line of the run, at trace level: none may name the person, before or after. */
    const logs = captureLogs('trace');

    before(async () => {
      ctx = await createWebhookTestContext(
        backend,
        { WEBHOOK_RETRY_SCHEDULE: '20ms,20ms' },
        { logger: logs.logger },
      );
      tenant = await createTenant(ctx, { tier: 'enterprise' });
      receiver = await HttpsReceiver.start({
        responder: (request) => {
          tries += 1;
          // One try in five fails first: the attempt log keeps a failed echo and a retry.
          const status = tries % 5 === 0 ? 500 : 200;
          if (request.path === '/echo') return { status, body: request.body };
          if (request.path === '/escaped') {
            return { status, body: JSON.stringify({ received: request.body }) };
          }
          return { status: 204 };
        },
      });
      const events = [...SUBSCRIBABLE_EVENT_TYPES];
      await createSubscription(ctx, tenant, receiver.url('/echo'), { events });
      await createSubscription(ctx, tenant, receiver.url('/escaped'), { events });
      await createSubscription(ctx, tenant, receiver.url('/thin'), { events, payload: 'thin' });
      rabbit = await RabbitQueue.open();
      await createSubscription(
        ctx,
        tenant,
        `amqp://guest:guest@127.0.0.1:${RABBIT_PORT}/?exchange=${rabbit.exchange}&routingKey=${rabbit.routingKey}`,
        { events },
      );
      worker = startWorker(ctx.runtime, { pollIntervalMs: 20, erasures: { pollMs: 20 } });
    });
    after(async () => {
      await worker.stop();
      await receiver.close();
      await rabbit?.close();
      await ctx.close();
    });

    const api = (method: 'GET' | 'POST', url: string, body?: unknown, key?: string) =>
      ctx.api(method, url, {
        token: tenant.token,
        body,
        headers: key ? { 'idempotency-key': key } : {},
      });
    const settled = async () =>
      eventually(async () => {
        const { db } = ctx.runtime.database;
        const open = await deliveryRows(db)
          .select(db.fn.countAll<number>().as('n'))
          .where('status', 'in', ['pending', 'in_flight'])
          .executeTakeFirstOrThrow();
        return Number(open.n) === 0;
      }, 'every delivery settled');

    it('erases one person from every store, the API and the portal; others stay byte-equal', async (t) => {
      const seed = Number(process.env.ERASURE_SEED ?? Date.now() % 1e9);
      t.diagnostic(`ERASURE_SEED=${seed}`);
      const [mode] = fc.sample(fc.constantFrom<Mode>('client', 'booking', 'email'), {
        numRuns: 1,
        seed,
      });
      const tripId = (await createTrip(ctx, tenant)).id as string;
      await ctx.admin('POST', `/admin/v1/trips/${tripId}/publish`);
      const roles: Person['role'][] = ['client', 'traveller', 'both'];
      const people: Person[] = Array.from({ length: 12 }, (_, i) => {
        const tag = randomUUID().slice(0, 8);
        return {
          name: `Zoë ${tag} Ñame${i}`,
          email: `p${tag}.${i}@example.test`,
          phone: `+43 660 ${tag.replace(/\D/g, '7').slice(0, 7)}${i}`,
          role: roles[i % 3],
          bookingIds: [],
        };
      });
      for (const [i, person] of people.entries()) {
        if (person.role !== 'traveller') {
          const made = await api(
            'POST',
            '/api/v1/clients',
            {
              kind: 'individual',
              displayName: person.name,
              email: person.email,
              phone: person.phone,
              notes: `Call ${person.phone} or write to ${person.email}`,
            },
            i % 2 === 0 ? randomUUID() : undefined,
          );
          assert.equal(made.statusCode, 201, made.body);
          person.clientId = made.json().data.id;
        }
        if (person.role !== 'client') {
          const booking = await ctx.admin<{ data: Row }>('POST', '/admin/v1/bookings', {
            tripId,
            totalRetailCents: 10_000 + i,
            currency: 'EUR',
            travelerName: person.name,
            travelerEmail: person.email,
          });
          const id = booking.data.id as string;
          person.bookingIds.push(id);
          await ctx.admin('POST', `/admin/v1/bookings/${id}/transition`, { to: 'deposit_paid' });
        }
      }
      await settled();
      // A redelivery of each of some deliveries: more attempts echoing the same bodies.
      const subs = (await api('GET', '/api/v1/webhooks')).json().data as Row[];
      for (const sub of subs) {
        const page = (await api('GET', `/api/v1/webhooks/${sub.id}/deliveries?limit=5`)).json()
          .data as Row[];
        for (const delivery of page.slice(0, 3)) {
          const again = await api(
            'POST',
            `/api/v1/webhooks/${sub.id}/deliveries/${delivery.id}/redeliver`,
          );
          assert.equal(again.statusCode, 202, again.body);
        }
      }
      await settled();

      const candidates = people.filter(
        (p) =>
          p.role === (mode === 'client' ? 'client' : mode === 'booking' ? 'traveller' : 'both'),
      );
      const [pickIndex] = fc.sample(fc.nat(candidates.length - 1), { numRuns: 1, seed });
      const person = candidates[pickIndex];
      const others = people.filter((p) => p !== person);
      const needles = [person.name, person.email, person.phone].flatMap(formsOf);
      const before = await dump(ctx);
      const held = (text: string) => needles.some((n) => text.includes(n));
      assert.ok(
        [...(before.get('events') as Map<string, string>).values()].some(held),
        'the person is in the events before',
      );
      assert.ok(
        [...(before.get('webhook_attempts') as Map<string, string>).values()].some(held),
        "the person is in the receivers' echoes before",
      );
      assert.ok(
        rabbit.messages.some((m) => held(m.body)),
        "the person is in the broker's messages before",
      );

      const subject =
        mode === 'client'
          ? { clientId: person.clientId }
          : mode === 'booking'
            ? { bookingId: person.bookingIds[0] }
            : { email: person.email.toUpperCase() };
      const asked = await api('POST', '/api/v1/erasures', subject, randomUUID());
      assert.equal(asked.statusCode, 202, asked.body);
      const erasureId = asked.json().data.id as string;
      const done = await until(async () => {
        const shown = await api('GET', `/api/v1/erasures/${erasureId}`);
        assert.equal(shown.statusCode, 200, shown.body);
        const erasure = shown.json().data as Row;
        return erasure.status === 'done' ? erasure : undefined;
      }, 'the erasure done');
      await settled();
      if (mode === 'email') assert.deepEqual(done.subject, { email: '***' });
      const counts = done.redacted as Record<string, number>;
      assert.equal(counts.clients, person.clientId ? 1 : 0);
      assert.equal(counts.bookings, person.bookingIds.length);
      assert.ok(counts.events > 0 && counts.webhookAttempts > 0, JSON.stringify(counts));

      // No text column of any table holds the person, in any form.
      const afterDump = await dump(ctx);
      for (const [table, rows] of afterDump) {
        for (const [key, text] of rows) {
          assert.ok(!held(text), `${table} ${key} still holds the person`);
        }
      }
      // Every other row is as it was, but those that held the person.
      for (const [table, rows] of before) {
        if (MOVING.has(table)) continue;
        for (const [key, text] of rows) {
          const now = afterDump.get(table)?.get(key);
          if (now === text) continue;
          assert.ok(held(text), `${table} ${key} changed though it did not hold the person`);
        }
      }
      // Everyone else's data is still there, as before.
      for (const other of others) {
        const events = [...(afterDump.get('events') as Map<string, string>).values()];
        assert.ok(
          events.some((text) => text.includes(other.email)),
          `${other.email} is kept`,
        );
        if (other.clientId) {
          const client = (await api('GET', `/api/v1/clients/${other.clientId}`)).json().data;
          assert.equal(client.email, other.email);
          assert.equal(client.phone, other.phone);
        }
      }

      // The API: the live resources, the events, the ledgers; and a redelivery goes redacted.
      if (person.clientId) {
        const client = (await api('GET', `/api/v1/clients/${person.clientId}`)).json().data;
        assert.equal(client.displayName, 'Erased client');
        assert.equal(client.email, null);
        assert.deepEqual(client.tags, []);
      }
      for (const id of person.bookingIds) {
        const booking = (await api('GET', `/api/v1/bookings/${id}`)).json().data;
        assert.equal(booking.travelerName, null);
        assert.equal(booking.travelerEmail, null);
      }
      const shown: string[] = [];
      for (const sub of subs) {
        const ledger = await api('GET', `/api/v1/webhooks/${sub.id}/events?limit=100`);
        shown.push(ledger.body);
        const items = ledger.json().data as Row[];
        for (const item of items.slice(0, 20)) {
          shown.push((await api('GET', `/api/v1/events/${item.id}`)).body);
        }
        const deliveries = await api('GET', `/api/v1/webhooks/${sub.id}/deliveries?limit=100`);
        for (const delivery of (deliveries.json().data as Row[]).slice(0, 10)) {
          const attempts = await api(
            'GET',
            `/api/v1/webhooks/${sub.id}/deliveries/${delivery.id}/attempts`,
          );
          shown.push(attempts.body);
        }
      }
      const echo = subs.find((s) => String(s.url).endsWith('/echo')) as Row;
      const erasedEvent = (
        (await api('GET', `/api/v1/webhooks/${echo.id}/events?type=personal_data.erased`)).json()
          .data as Row[]
      )[0];
      assert.deepEqual(erasedEvent.data, {
        erasureId,
        clientIds: person.clientId ? [person.clientId] : [],
        bookingIds: person.bookingIds,
      });
      const personal = (
        (await api('GET', `/api/v1/webhooks/${echo.id}/events?limit=100`)).json().data as Row[]
      ).filter((e) => {
        const data = e.data as Row;
        return (
          data.clientId === person.clientId || person.bookingIds.includes(data.bookingId as string)
        );
      });
      assert.ok(personal.length > 0);
      const deliveryOf = (
        (await api('GET', `/api/v1/webhooks/${echo.id}/deliveries?limit=100`)).json().data as Row[]
      ).find((d) => d.eventId === personal[0].id) as Row;
      const sent = receiver.requests.length;
      await api('POST', `/api/v1/webhooks/${echo.id}/deliveries/${deliveryOf.id}/redeliver`);
      await eventually(() => receiver.requests.length > sent);
      await settled();
      const redelivered = receiver.requests.slice(sent);
      assert.ok(redelivered.some((r) => r.body.includes(String(personal[0].id))));
      for (const request of redelivered) assert.ok(!held(request.body), 'redelivered redacted');
      // The broker's copy follows from the announcement, and a redelivery to it goes redacted.
      const broker = subs.find((s) => String(s.url).startsWith('amqp://')) as Row;
      const brokerDelivery = (
        (await api('GET', `/api/v1/webhooks/${broker.id}/deliveries?limit=100`)).json()
          .data as Row[]
      ).find((d) => d.eventId === personal[0].id) as Row;
      const published = rabbit.messages.length;
      const again = await api(
        'POST',
        `/api/v1/webhooks/${broker.id}/deliveries/${brokerDelivery.id}/redeliver`,
      );
      assert.equal(again.statusCode, 202, again.body);
      const republished = await until(
        () =>
          rabbit.messages.slice(published).find((m) => JSON.parse(m.body).id === personal[0].id),
        'the redelivery on the broker',
      );
      assert.ok(!held(republished.body), 'redelivered to the broker redacted');
      assert.ok(
        rabbit.messages.some((m) => JSON.parse(m.body).type === 'personal_data.erased'),
        'the broker heard of the erasure',
      );
      await settled();
      // The portal's pages.
      const link = await api('POST', '/api/v1/portal/sessions', {});
      const portal = new PortalClient(ctx);
      await portal.signIn(pathOf(link.json().data.url));
      for (const sub of subs) {
        const page = await portal.get(`/portal/endpoints/${sub.id}`);
        assert.equal(page.statusCode, 200);
        shown.push(page.body);
        const delivery = (
          await portal.get(`/portal/endpoints/${sub.id}/deliveries/${deliveryOf.id}`)
        ).body;
        shown.push(delivery);
      }
      for (const text of shown) assert.ok(!held(text), `an API or portal read holds the person`);
      assert.ok(logs.lines.length > 100, 'the run logged');
      for (const line of logs.lines)
        assert.ok(!held(JSON.stringify(line)), 'a log line names them');
    });

    it('refuses a subject that is not exactly one known client, booking or address', async () => {
      for (const body of [{}, { clientId: 'cli_x', email: 'a@example.test' }, { email: 'nope' }]) {
        const refused = await api('POST', '/api/v1/erasures', body);
        assert.equal(refused.statusCode, 422, `${JSON.stringify(body)}: ${refused.body}`);
      }
      assert.equal(
        (await api('POST', '/api/v1/erasures', { clientId: 'cli_none' })).statusCode,
        404,
      );
      assert.equal(
        (await api('POST', '/api/v1/erasures', { bookingId: 'bkg_none' })).statusCode,
        404,
      );
      assert.equal((await api('GET', '/api/v1/erasures/era_none')).statusCode, 404);
    });
  });
}

/** Events per tenant in the kill test: enough batches that a kill lands part-way. */
const KILL_EVENTS = 8_000;

for (const backend of BACKENDS) {
  describe(`erasure killed part-way (${backend})`, () => {
    let ctx: TestContext;

    before(async () => {
      ctx = await createWebhookTestContext(backend);
    });
    after(() => ctx.close());

    /** A tenant with one person among others and many events about them all; the person's id. */
    const seedTenant = async () => {
      const tenant = await createTenant(ctx, { tier: 'enterprise' });
      const { clients } = ctx.runtime.services;
      const made: Awaited<ReturnType<typeof clients.create>>[] = [];
      for (let i = 0; i < 6; i++) {
        made.push(
          await clients.create(tenant.id, {
            kind: 'individual',
            displayName: `Kill Person ${i}`,
            email: `kill${i}@example.test`,
            phone: `+43 660 555000${i}`,
          }),
        );
      }
      await recordClientUpdates(ctx, tenant.id, made, KILL_EVENTS);
      return { tenant, person: made[0].id as string };
    };
    const erasureRow = (id: string) =>
      ctx.runtime.database.db
        .selectFrom('erasures')
        .selectAll()
        .where('id', '=', id)
        .executeTakeFirstOrThrow();

    it('resumes after kill -9 and counts what a run never interrupted counts', async () => {
      const whole = await seedTenant();
      const cut = await seedTenant();
      const { erasures } = ctx.runtime.services;
      const first = await erasures.create(whole.tenant.id, { clientId: whole.person });
      while (await erasures.runNext('uninterrupted'));
      const expected = await erasures.get(whole.tenant.id, first.id);
      assert.equal(expected.status, 'done');
      assert.equal(expected.redacted.events, Math.ceil(KILL_EVENTS / 6) + 1);

      const second = await erasures.create(cut.tenant.id, { clientId: cut.person });
      const killed = await startTourops(['worker'], ctx.env, WORKER_READY);
      try {
        await until(
          async () => {
            const row = await erasureRow(second.id);
            return JSON.parse(row.cursor).seq > 0 ? row : undefined;
          },
          'the erasure part-way',
          5,
        );
        assert.equal(await killed.stop('SIGKILL'), null, 'killed, no exit code');
      } finally {
        await killed.stop('SIGKILL');
      }
      const leftAt = await erasureRow(second.id);
      assert.notEqual(leftAt.status, 'done', 'killed before it finished');
      const resumed = await startTourops(['worker'], ctx.env, WORKER_READY);
      try {
        const done = await until(async () => {
          const erasure = await erasures.get(cut.tenant.id, second.id);
          return erasure.status === 'done' ? erasure : undefined;
        }, 'the erasure resumed and done');
        assert.deepEqual(done.redacted, expected.redacted);
      } finally {
        await resumed.stop();
      }
      const left = await ctx.runtime.database.db
        .selectFrom('events')
        .select('data')
        .where('tenantId', '=', cut.tenant.id)
        .execute();
      assert.ok(!left.some((row) => row.data.includes('kill0@example.test')));
      assert.ok(left.filter((row) => row.data.includes('kill1@example.test')).length > 1000);
    });
  });
}
