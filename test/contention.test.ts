import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { LightMyRequestResponse as Answer } from 'fastify';
import { startWorker } from '../src/start-worker.ts';
import { BACKENDS, createWebhookTestContext, type TestContext } from './helpers/context.ts';
import { deliveryRows } from './helpers/delivery-rows.ts';
import {
  createBooking,
  createTenant,
  createTrip,
  type TenantFixture,
  tripBody,
} from './helpers/fixtures.ts';
import { HttpsReceiver } from './helpers/https-receiver.ts';
import { until } from './helpers/until.ts';

const PARALLEL = 32;

/** `n` calls started at once; their answers in order. */
function all(n: number, call: (i: number) => Promise<Answer>): Promise<Answer[]> {
  return Promise.all(Array.from({ length: n }, (_, i) => call(i)));
}

function statuses(answers: Answer[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const answer of answers) counts[answer.statusCode] = (counts[answer.statusCode] ?? 0) + 1;
  return counts;
}

/** Every answer is one of `allowed`; never a 5xx (the body of the first offender says why). */
function assertOnly(answers: Answer[], allowed: number[]): void {
  const wrong = answers.find((answer) => !allowed.includes(answer.statusCode));
  assert.ok(wrong === undefined, `${JSON.stringify(statuses(answers))}: ${wrong?.body}`);
}

/** Half the callers send an Idempotency-Key (as the SDK does), half none. */
function keyed(i: number): Record<string, string> {
  return i % 2 === 0 ? { 'idempotency-key': randomUUID() } : {};
}

for (const backend of BACKENDS) {
  describe(`32 clients of one tenant at once, beside the worker (${backend})`, () => {
    let ctx: TestContext;
    let receiver: HttpsReceiver;
    let worker: ReturnType<typeof startWorker>;
    let tenant: TenantFixture;
    let hookId: string;

    before(async () => {
      receiver = await HttpsReceiver.start();
      ctx = await createWebhookTestContext(backend);
      tenant = await createTenant(ctx);
      // Every event of the tenant is delivered while the writes run.
      const hook = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: {
          url: `https://127.0.0.1:${receiver.port}/hook`,
          events: ['trip.published', 'trip.unpublished', 'client.created', 'booking.confirmed'],
        },
      });
      assert.equal(hook.statusCode, 201, hook.body);
      hookId = hook.json().data.id;
      worker = startWorker(ctx.runtime, { pollIntervalMs: 20 });
    });
    after(async () => {
      await worker?.stop();
      await ctx?.close();
      await receiver?.close();
    });

    const count = async (table: 'trips' | 'clients', tenantId: string) => {
      const row = await ctx.runtime.database.db
        .selectFrom(table)
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('tenantId', '=', tenantId)
        .executeTakeFirstOrThrow();
      return Number(row.n);
    };

    it('creates trips and clients, keyed and not: every one answered 201 and stored once', async () => {
      const before = {
        trips: await count('trips', tenant.id),
        clients: await count('clients', tenant.id),
      };
      const answers = await all(PARALLEL * 2, (i) =>
        i < PARALLEL
          ? ctx.api('POST', '/api/v1/trips', {
              token: tenant.token,
              headers: keyed(i),
              body: tripBody(tenant, { title: `Trip ${i}` }),
            })
          : ctx.api('POST', '/api/v1/clients', {
              token: tenant.token,
              headers: keyed(i),
              body: { kind: 'individual', displayName: `Client ${i}` },
            }),
      );
      assertOnly(answers, [201]);
      const ids = new Set(answers.map((answer) => answer.json().data.id));
      assert.equal(ids.size, PARALLEL * 2);
      assert.equal(await count('trips', tenant.id), before.trips + PARALLEL);
      assert.equal(await count('clients', tenant.id), before.clients + PARALLEL);
    });

    it('replays one key sent by 32 clients at once: one trip, 32 identical answers', async () => {
      const key = randomUUID();
      const before = await count('trips', tenant.id);
      const body = tripBody(tenant, { title: 'Sent by every retry at once' });
      const answers = await all(PARALLEL, () =>
        ctx.api('POST', '/api/v1/trips', {
          token: tenant.token,
          headers: { 'idempotency-key': key },
          body,
        }),
      );
      // A duplicate waits for the first answer (2 s at most), else 409 idempotency-in-progress.
      assertOnly(answers, [201, 409]);
      const created = answers.filter((answer) => answer.statusCode === 201);
      assert.ok(created.length >= 1);
      assert.equal(new Set(created.map((answer) => answer.body)).size, 1);
      assert.equal(await count('trips', tenant.id), before + 1);
    });

    it('fills a trip quota exactly: 99 of 100, 32 creates at once, ends at 100', async () => {
      const starter = await createTenant(ctx, { tier: 'starter' });
      await ctx.admin('PATCH', `/admin/v1/tenants/${starter.id}`, { tripQuota: 100 });
      for (let i = 0; i < 99; i++) await createTrip(ctx, starter, { title: `Seed ${i}` });
      const answers = await all(PARALLEL, (i) =>
        ctx.api('POST', '/api/v1/trips', {
          token: starter.token,
          headers: keyed(i),
          body: tripBody(starter),
        }),
      );
      assertOnly(answers, [201, 403]);
      assert.deepEqual(statuses(answers), { 201: 1, 403: PARALLEL - 1 });
      for (const answer of answers.filter((a) => a.statusCode === 403)) {
        assert.equal(answer.json().code, 'trip_quota_exceeded');
      }
      assert.equal(await count('trips', starter.id), 100);
    });

    it('fills the webhook endpoint cap exactly: 32 registrations at once, 10 kept', async () => {
      const other = await createTenant(ctx);
      const answers = await all(PARALLEL, (i) =>
        ctx.api('POST', '/api/v1/webhooks', {
          token: other.token,
          headers: keyed(i),
          body: { url: `https://127.0.0.1:${receiver.port}/cap/${i}`, events: ['trip.published'] },
        }),
      );
      assertOnly(answers, [201, 403]);
      assert.deepEqual(statuses(answers), { 201: 10, 403: PARALLEL - 10 });
      const live = await ctx.api('GET', '/api/v1/webhooks', { token: other.token });
      assert.equal(live.json().data.length, 10);
    });

    it('publishes one trip from 8 callers at once: one trip.published event, then one unpublish', async () => {
      const trip = await createTrip(ctx, tenant);
      const published = await all(8, () =>
        ctx.adminRequest('POST', `/admin/v1/trips/${trip.id}/publish`),
      );
      assertOnly(published, [200]);
      assert.equal(new Set(published.map((answer) => answer.json().data.publishedAt)).size, 1);
      const unpublished = await all(8, () =>
        ctx.adminRequest('POST', `/admin/v1/trips/${trip.id}/unpublish`),
      );
      assertOnly(unpublished, [200]);
      const events = await ctx.runtime.database.db
        .selectFrom('events')
        .select('type')
        .where('tenantId', '=', tenant.id)
        .where('data', 'like', `%${trip.id}%`)
        .execute();
      assert.deepEqual(events.map((event) => event.type).sort(), [
        'trip.created',
        'trip.published',
        'trip.unpublished',
      ]);
    });

    it('decides conflicting trip status changes one way: accepted or rejected, never both', async () => {
      for (let round = 0; round < 3; round++) {
        const trip = await createTrip(ctx, tenant);
        for (const status of ['active', 'sent']) {
          await ctx.admin('POST', `/admin/v1/trips/${trip.id}/status`, { status });
        }
        const answers = await all(8, (i) =>
          ctx.adminRequest('POST', `/admin/v1/trips/${trip.id}/status`, {
            status: i % 2 === 0 ? 'accepted' : 'rejected',
          }),
        );
        assertOnly(answers, [200, 409]);
        assert.deepEqual(statuses(answers), { 200: 1, 409: 7 });
        const winner = answers.find((answer) => answer.statusCode === 200)?.json().data.status;
        const stored = await ctx.runtime.repositories.trips.findById(tenant.id, trip.id);
        assert.equal(stored?.status, winner);
      }
    });

    it('moves a booking and its payment once each under 8 concurrent callers', async () => {
      const { booking, payment } = await createBooking(ctx, tenant);
      const paid = await all(8, () =>
        ctx.adminRequest('POST', `/admin/v1/bookings/${booking.id}/transition`, {
          to: 'deposit_paid',
        }),
      );
      assertOnly(paid, [200, 409]);
      assert.equal(statuses(paid)[200], 1);
      const confirmed = await all(8, () =>
        ctx.adminRequest('POST', `/admin/v1/bookings/${booking.id}/transition`, {
          to: 'confirmed',
        }),
      );
      assertOnly(confirmed, [200, 409]);
      assert.equal(statuses(confirmed)[200], 1);
      const confirmations = await ctx.runtime.database.db
        .selectFrom('events')
        .select('id')
        .where('type', '=', 'booking.confirmed')
        .where('data', 'like', `%${booking.id}%`)
        .execute();
      assert.equal(confirmations.length, 1);
      const moves = await all(8, (i) =>
        ctx.adminRequest('POST', `/admin/v1/payments/${payment.id}/transition`, {
          to: i % 2 === 0 ? 'processing' : 'cancelled',
        }),
      );
      assertOnly(moves, [200, 409]);
      assert.equal(statuses(moves)[200], 1);
    });

    it('rotates a key from 2 callers at once: both keys returned still sign', async () => {
      const created = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: `https://127.0.0.1:${receiver.port}/rotate`, events: ['trip.published'] },
      });
      const id = created.json().data.id;
      const answers = await all(2, (i) =>
        ctx.api('POST', `/api/v1/webhooks/${id}/rotate-key`, {
          token: tenant.token,
          headers: keyed(i),
        }),
      );
      assertOnly(answers, [200]);
      const returned = answers.map((answer) => answer.json().signingKey as string);
      const row = await ctx.runtime.repositories.webhooks.findSubscription(tenant.id, id);
      assert.ok(row);
      const retired = JSON.parse(row.retiredSigningKeys) as Array<{ key: string }>;
      const secrets = ctx.runtime.services.secrets;
      const signing = [
        secrets.decrypt(row.signingKey, id),
        ...retired.map((r) => secrets.decrypt(r.key, id)),
      ];
      // Both returned keys sign, and so does the subscription's first key (each rotation
      // promised its retired key the overlap).
      assert.equal(signing.length, 3);
      for (const key of returned) assert.ok(signing.includes(key), 'a returned key signs');
    });

    it('deletes a subscription from 4 callers at once: one 204, the others 404', async () => {
      const created = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: `https://127.0.0.1:${receiver.port}/delete`, events: ['trip.published'] },
      });
      const id = created.json().data.id;
      const answers = await all(4, (i) =>
        ctx.api('DELETE', `/api/v1/webhooks/${id}`, { token: tenant.token, headers: keyed(i) }),
      );
      assertOnly(answers, [204, 404]);
      assert.deepEqual(statuses(answers), { 204: 1, 404: 3 });
    });

    it('runs every write route at once, keyed and not: no 5xx, each write applied once', async () => {
      const trip = await createTrip(ctx, tenant);
      const published = await createTrip(ctx, tenant);
      const delivered = await deliveryRows(ctx.runtime.database.db)
        .select(['id', 'subscriptionId'])
        .where('tenantId', '=', tenant.id)
        .where('status', '=', 'success')
        .executeTakeFirstOrThrow();
      const since = new Date(Date.now() - 3_600_000).toISOString();
      const patches = 8;
      const calls: Array<() => Promise<Answer>> = [
        ...Array.from(
          { length: patches },
          (_, i) => () =>
            ctx.api('PATCH', `/api/v1/trips/${trip.id}`, {
              token: tenant.token,
              headers: keyed(i),
              body: { notes: `patch ${i}` },
            }),
        ),
        ...Array.from(
          { length: 4 },
          (_, i) => () =>
            ctx.api('POST', '/api/v1/webhooks/test', {
              token: tenant.token,
              headers: keyed(i),
              body: { subscriptionId: hookId },
            }),
        ),
        ...Array.from(
          { length: 4 },
          (_, i) => () =>
            ctx.api(
              'POST',
              `/api/v1/webhooks/${delivered.subscriptionId}/deliveries/${delivered.id}/redeliver`,
              { token: tenant.token, headers: keyed(i) },
            ),
        ),
        ...Array.from(
          { length: 4 },
          (_, i) => () =>
            ctx.api('POST', `/api/v1/webhooks/${hookId}/recover`, {
              token: tenant.token,
              headers: keyed(i),
              body: { since },
            }),
        ),
        ...Array.from(
          { length: 4 },
          (_, i) => () =>
            ctx.adminRequest('POST', `/admin/v1/tenants/${tenant.id}/tokens`, {
              scopes: ['trips:read'],
              name: `parallel ${i}`,
            }),
        ),
        ...Array.from(
          { length: 4 },
          (_, i) => () =>
            ctx.adminRequest('POST', `/admin/v1/tenants/${tenant.id}/members`, {
              email: `member${i}.${randomUUID().slice(0, 8)}@example.com`,
              role: 'member',
            }),
        ),
        () => ctx.adminRequest('PATCH', `/admin/v1/tenants/${tenant.id}`, { name: 'Renamed' }),
        () => ctx.adminRequest('POST', `/admin/v1/trips/${published.id}/publish`),
        () => ctx.adminRequest('POST', `/admin/v1/webhooks/${hookId}/enable`),
        () =>
          ctx.api('POST', '/api/v1/clients', {
            token: tenant.token,
            headers: keyed(0),
            body: { kind: 'company', displayName: 'At once' },
          }),
      ];
      const answers = await Promise.all(calls.map((call) => call()));
      const wrong = answers.find((answer) => answer.statusCode >= 300);
      assert.ok(wrong === undefined, `${JSON.stringify(statuses(answers))}: ${wrong?.body}`);
      // Each PATCH took a version of its own.
      const stored = await ctx.runtime.repositories.trips.findById(tenant.id, trip.id);
      assert.equal(stored?.version, 1 + patches);
    });

    it('delivered every delivery the writes queued, each once, while they ran', async () => {
      const { db } = ctx.runtime.database;
      const unsettled = () =>
        deliveryRows(db)
          .select('id')
          .where('tenantId', '=', tenant.id)
          .where('status', 'in', ['pending', 'in_flight'])
          .execute();
      await until(
        async () => ((await unsettled()).length === 0 ? true : undefined),
        'every delivery recorded',
        50,
      );
      const delivered = await deliveryRows(db)
        .select(['id', 'status'])
        .where('tenantId', '=', tenant.id)
        .where('subscriptionId', '=', hookId)
        .execute();
      assert.ok(delivered.length >= PARALLEL / 2);
      assert.ok(delivered.every((delivery) => delivery.status === 'success'));
      // Each delivery row of the /hook subscription reached it once (a redelivery is a row of its
      // own; the others have paths of their own). Its request id is `<delivery id>.<attempt>`.
      const received = receiver.requests
        .filter((request) => request.path === '/hook')
        .map((request) => String(request.headers['service-request-id']).split('.')[0]);
      assert.equal(new Set(received).size, received.length);
      assert.deepEqual(received.sort(), delivered.map((delivery) => delivery.id).sort());
    });
  });
}
