import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { applicationFee } from '../src/services/bookings-service.ts';
import { BACKENDS, createTestContext, type TestContext } from './helpers/context.ts';
import { createBooking, createTenant, createTrip, type TenantFixture } from './helpers/fixtures.ts';

const BOOKING_FIELDS = [
  'id',
  'bookingNumber',
  'tripId',
  'tripVersion',
  'status',
  'totalRetailCents',
  'applicationFeeCents',
  'currency',
  'travelerName',
  'travelerEmail',
  'confirmedAt',
  'cancelledAt',
  'departureId',
  'departureStartDate',
  'departureEndDate',
  'createdAt',
  'updatedAt',
].sort();
const PAYMENT_FIELDS = [
  'id',
  'bookingId',
  'mode',
  'status',
  'label',
  'amountCents',
  'currency',
  'scheduledFor',
  'chargedAt',
  'isDeposit',
  'paymentRail',
  'kind',
].sort();

type Row = Record<string, unknown> & { id: string };

for (const backend of BACKENDS) {
  describe(`bookings, payments and their events (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;

    before(async () => {
      ctx = await createTestContext(backend, { env: { STOREFRONT_BASE_URL: 'https://shop.test' } });
      tenant = await createTenant(ctx);
    });
    after(() => ctx.close());

    const events = async (tenantId = tenant.id) =>
      (await ctx.runtime.repositories.events.listForTenant(tenantId)).map((e) => ({
        type: e.type,
        data: JSON.parse(e.data),
        id: e.id,
      }));
    const transition = (id: string, to: string) =>
      ctx.adminRequest('POST', `/admin/v1/bookings/${id}/transition`, { to });

    it('creates bookings only on published trips, pinning version, snapshot and fee', async () => {
      const trip = await createTrip(ctx, tenant);
      const unpublished = await ctx.adminRequest('POST', '/admin/v1/bookings', {
        tripId: trip.id,
        totalRetailCents: 1000,
        currency: 'EUR',
        travelerName: 'A',
        travelerEmail: 'a@example.com',
      });
      assert.equal(unpublished.statusCode, 422);
      assert.ok(unpublished.json().errors.tripId);

      await ctx.api('PATCH', `/api/v1/trips/${trip.id}`, {
        token: tenant.token,
        body: { title: 'Version two' },
      });
      await ctx.admin('POST', `/admin/v1/trips/${trip.id}/publish`);
      const created = await ctx.admin<{ data: Row }>('POST', '/admin/v1/bookings', {
        tripId: trip.id,
        totalRetailCents: 150_000,
        currency: 'EUR',
        travelerName: 'Ada',
        travelerEmail: 'ada@example.com',
        departureId: 'dep-2027-04',
        departureStartDate: '2027-04-01',
      });
      const booking = created.data;
      assert.equal(booking.status, 'payment_pending');
      assert.equal(booking.tripVersion, 2);
      assert.equal(booking.applicationFeeCents, 3000);
      assert.equal(booking.departureStartDate, '2027-04-01T00:00:00.000Z');
      assert.match(String(booking.bookingNumber), /^BK-[0-9A-HJKMNP-TV-Z]{6}$/);

      // Later edits of the trip do not reach the booking's frozen snapshot.
      await ctx.api('PATCH', `/api/v1/trips/${trip.id}`, {
        token: tenant.token,
        body: { title: 'Version three' },
      });
      const row = await ctx.runtime.repositories.bookings.findById(tenant.id, booking.id);
      assert.equal(JSON.parse(row?.tripSnapshot ?? '{}').title, 'Version two');

      const read = await ctx.api('GET', `/api/v1/bookings/${booking.id}`, { token: tenant.token });
      assert.deepEqual(Object.keys(read.json().data).sort(), BOOKING_FIELDS);
      assert.equal(read.json().data.tripVersion, 2);
    });

    it('caps the platform fee at 40.00 and rounds 2%', () => {
      assert.equal(applicationFee(10_000), 200);
      assert.equal(applicationFee(199_999), 4000);
      assert.equal(applicationFee(1_000_000), 4000);
      assert.equal(applicationFee(125), 3);
      assert.equal(applicationFee(0), 0);
    });

    it('moves bookings only along the documented flow, with the documented events', async () => {
      const { booking } = await createBooking(ctx, tenant);
      const before = (await events()).length;
      assert.equal(
        (await transition(booking.id, 'confirmed')).statusCode,
        409,
        'payment_pending cannot jump to confirmed',
      );
      const conflict = await transition(booking.id, 'completed');
      assert.equal(conflict.json().code, 'invalid_transition');
      assert.equal(conflict.json().type, 'http://api.test/errors/conflict');
      assert.equal((await transition(booking.id, 'bogus')).statusCode, 422);

      assert.equal((await transition(booking.id, 'deposit_paid')).statusCode, 200);
      const confirmed = (await transition(booking.id, 'confirmed')).json().data;
      assert.ok(confirmed.confirmedAt);
      assert.equal((await transition(booking.id, 'disputed')).statusCode, 200);
      assert.equal((await transition(booking.id, 'confirmed')).statusCode, 200);
      assert.equal(
        (await transition(booking.id, 'cancelled')).json().data.cancelledAt !== null,
        true,
      );
      assert.equal(
        (await transition(booking.id, 'confirmed')).statusCode,
        409,
        'cancelled is final',
      );

      const emitted = (await events()).slice(before);
      // Every move announced: the spec's types, the move it names none for as booking.updated.
      assert.deepEqual(
        emitted.map((e) => e.type),
        [
          'booking.updated',
          'booking.confirmed',
          'dispute.opened',
          'dispute.closed',
          'booking.cancelled',
        ],
      );
      const { object, changes, ...members } = emitted[1].data;
      assert.deepEqual(members, {
        bookingId: booking.id,
        tripId: booking.tripId,
        status: 'confirmed',
        totalRetailCents: 150_000,
        currency: 'EUR',
      });
      assert.deepEqual(object, confirmed, 'the booking as its GET shows it after the change');
      assert.deepEqual(changes, {
        status: { before: 'deposit_paid', after: 'confirmed' },
        confirmedAt: { before: null, after: confirmed.confirmedAt },
        updatedAt: { before: emitted[0].data.object.updatedAt, after: confirmed.updatedAt },
      });
      assert.deepEqual(emitted[0].data.changes.status, {
        before: 'payment_pending',
        after: 'deposit_paid',
      });
      assert.equal(emitted[4].data.status, 'cancelled');
      for (const event of emitted) assert.match(event.id, /^[0-9a-f-]{36}$/);
    });

    it('closes a dispute into a refund with dispute.closed then booking.refunded', async () => {
      const { booking } = await createBooking(ctx, tenant);
      for (const to of ['deposit_paid', 'confirmed', 'disputed']) await transition(booking.id, to);
      const before = (await events()).length;
      assert.equal((await transition(booking.id, 'refunded')).statusCode, 200);
      assert.deepEqual(
        (await events()).slice(before).map((e) => [e.type, e.data.status]),
        [
          ['dispute.closed', 'refunded'],
          ['booking.refunded', 'refunded'],
        ],
      );
    });

    it('runs a trip through its lifecycle and emits publish events', async () => {
      const trip = await createTrip(ctx, tenant);
      const status = (to: string) =>
        ctx.adminRequest('POST', `/admin/v1/trips/${trip.id}/status`, { status: to });
      const start = (await events()).length;
      assert.equal((await status('sent')).statusCode, 409);
      const moves = ['active', 'sent', 'rejected', 'active', 'sent', 'accepted', 'archived'];
      for (const to of moves) assert.equal((await status(to)).statusCode, 200, to);
      assert.equal((await status('active')).statusCode, 409, 'archived is final');
      // Each move announced once, a refused one not at all.
      assert.deepEqual(
        (await events()).slice(start).map((e) => [e.type, e.data.changes.status?.after]),
        moves.map((to) => ['trip.updated', to]),
      );

      const before = (await events()).length;
      const published = (
        await ctx.admin<{ data: Row }>('POST', `/admin/v1/trips/${trip.id}/publish`)
      ).data;
      assert.ok(published.publicSlug);
      assert.ok(published.publishedAt);
      const unpublished = (
        await ctx.admin<{ data: Row }>('POST', `/admin/v1/trips/${trip.id}/unpublish`)
      ).data;
      assert.equal(unpublished.publicSlug, published.publicSlug, 'the slug is kept');
      assert.ok(unpublished.unpublishedAt);
      const emitted = (await events()).slice(before);
      assert.deepEqual(
        emitted.map((e) => e.type),
        ['trip.published', 'trip.unpublished'],
      );
      const { object, changes, ...members } = emitted[1].data;
      assert.deepEqual(members, {
        tripId: trip.id,
        publicSlug: published.publicSlug,
        publishedAt: published.publishedAt,
        unpublishedAt: unpublished.unpublishedAt,
      });
      assert.deepEqual(object, unpublished);
      assert.deepEqual(Object.keys(changes).sort(), ['unpublishedAt', 'updatedAt']);
      assert.deepEqual(Object.keys(emitted[0].data.changes).sort(), [
        'publicSlug',
        'publishedAt',
        'updatedAt',
      ]);
    });

    it('POST /api/v1/bookings validates, then answers 501 with the checkout URL and creates nothing', async () => {
      const { trip } = await createBooking(ctx, tenant);
      const draft = await createTrip(ctx, tenant);
      const count = async () =>
        (await ctx.api('GET', '/api/v1/bookings?limit=100', { token: tenant.token })).json().data
          .length;
      const before = await count();
      const post = (body: unknown) =>
        ctx.api('POST', '/api/v1/bookings', { token: tenant.token, body });
      const valid = { tripId: trip.id, travelerName: 'Ada', travelerEmail: 'ada@example.com' };

      assert.equal((await post({ ...valid, tripId: 'trp_unknown' })).statusCode, 404);
      // Documented order: an unknown trip answers 404 even when other fields also fail.
      assert.equal((await post({ tripId: 'trp_unknown', travelerEmail: 'nope' })).statusCode, 404);
      const missingTrip = await post({ travelerName: 'Ada', travelerEmail: 'ada@example.com' });
      assert.equal(missingTrip.statusCode, 422);
      assert.deepEqual(missingTrip.json().errors, { tripId: ['is required'] });
      const notPublished = await post({ ...valid, tripId: draft.id });
      assert.equal(notPublished.statusCode, 422);
      assert.ok(notPublished.json().errors.tripId);
      const badEmail = await post({ ...valid, travelerEmail: 'nope' });
      assert.equal(badEmail.statusCode, 422);
      assert.ok(badEmail.json().errors.travelerEmail);

      const response = await post(valid);
      assert.equal(response.statusCode, 501);
      assert.match(String(response.headers['content-type']), /^application\/problem\+json/);
      const problem = response.json();
      assert.equal(problem.type, 'http://api.test/errors/booking-create-not-supported');
      assert.equal(problem.next.checkoutUrl, `https://shop.test/checkout/${trip.publicSlug}`);
      assert.equal(await count(), before);
    });

    it('lists bookings by id ascending with status and tripId filters', async () => {
      const t = await createTenant(ctx);
      const a = await createBooking(ctx, t);
      const b = await createBooking(ctx, t);
      await transition(b.booking.id, 'deposit_paid');
      const all = (await ctx.api('GET', '/api/v1/bookings', { token: t.token }))
        .json()
        .data.map((x: Row) => x.id);
      assert.deepEqual(all, [a.booking.id, b.booking.id]);
      const paid = (
        await ctx.api('GET', '/api/v1/bookings?status=deposit_paid', { token: t.token })
      ).json().data;
      assert.deepEqual(
        paid.map((x: Row) => x.id),
        [b.booking.id],
      );
      const ignored = (
        await ctx.api('GET', '/api/v1/bookings?status=nonsense', { token: t.token })
      ).json().data;
      assert.equal(ignored.length, 2);
      const byTrip = (
        await ctx.api('GET', `/api/v1/bookings?tripId=${a.trip.id}`, { token: t.token })
      ).json().data;
      assert.deepEqual(
        byTrip.map((x: Row) => x.id),
        [a.booking.id],
      );
    });

    it('records payments: the first is the deposit, transitions set chargedAt and emit events', async () => {
      const t = await createTenant(ctx);
      const { booking, payment } = await createBooking(ctx, t);
      assert.equal(payment.isDeposit, true);
      assert.equal(payment.status, 'pending');
      const second = await ctx.admin<{ data: Row }>(
        'POST',
        `/admin/v1/bookings/${booking.id}/payments`,
        {
          mode: 'installment',
          label: 'Balance',
          amountCents: 105_000,
          currency: 'EUR',
          kind: 'sepa_debit',
          paymentRail: 'bank',
          scheduledFor: '2027-03-01T09:00:00Z',
        },
      );
      assert.equal(second.data.isDeposit, false);
      assert.equal(second.data.scheduledFor, '2027-03-01T09:00:00.000Z');

      const move = (id: string, to: string) =>
        ctx.adminRequest('POST', `/admin/v1/payments/${id}/transition`, { to });
      assert.equal((await move(payment.id, 'succeeded')).statusCode, 409);
      assert.equal((await move(payment.id, 'processing')).statusCode, 200);
      const succeeded = (await move(payment.id, 'succeeded')).json().data;
      assert.ok(succeeded.chargedAt);
      assert.equal((await move(second.data.id, 'scheduled')).statusCode, 200);
      assert.equal((await move(second.data.id, 'processing')).statusCode, 200);
      assert.equal((await move(second.data.id, 'failed')).json().data.chargedAt, null);
      assert.equal(
        (await move(second.data.id, 'scheduled')).statusCode,
        200,
        'failed can be rescheduled',
      );

      const emitted = (await events(t.id)).filter((e) => e.type.startsWith('payment.'));
      assert.deepEqual(
        emitted.map((e) => [e.type, e.data.status]),
        [
          ['payment.created', 'pending'],
          ['payment.created', 'pending'],
          ['payment.updated', 'processing'],
          ['payment.succeeded', 'succeeded'],
          ['payment.updated', 'scheduled'],
          ['payment.updated', 'processing'],
          ['payment.failed', 'failed'],
          ['payment.updated', 'scheduled'],
        ],
      );
      const { object, changes, ...members } = emitted[3].data;
      assert.deepEqual(members, {
        paymentId: payment.id,
        bookingId: booking.id,
        status: 'succeeded',
        amountCents: 45_000,
        currency: 'EUR',
      });
      assert.deepEqual(object, succeeded, 'the payment as the payments list shows it');
      assert.deepEqual(changes, {
        status: { before: 'processing', after: 'succeeded' },
        chargedAt: { before: null, after: succeeded.chargedAt },
      });
      assert.deepEqual(emitted[0].data.changes, {}, 'a creation moved nothing');

      const list = await ctx.api('GET', '/api/v1/payments', { token: t.token });
      assert.deepEqual(
        list.json().data.map((p: Row) => p.id),
        [payment.id, second.data.id],
      );
      assert.deepEqual(Object.keys(list.json().data[0]).sort(), PAYMENT_FIELDS);
      const filtered = await ctx.api(
        'GET',
        `/api/v1/payments?status=succeeded&bookingId=${booking.id}`,
        { token: t.token },
      );
      assert.deepEqual(
        filtered.json().data.map((p: Row) => p.id),
        [payment.id],
      );
      const unknown = await ctx.api('GET', '/api/v1/payments?status=whatever', { token: t.token });
      assert.equal(unknown.json().data.length, 2);
    });
  });
}
