import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Stripe from 'stripe';
import { assertEventData } from '../src/domain/event-schemas.ts';
import { SUBSCRIBABLE_EVENT_TYPES } from '../src/domain/states.ts';
import { startWorker } from '../src/start-worker.ts';
import { attemptLog, createdWithin } from './helpers/attempt-log.ts';
import { BACKENDS, createTestContext, type TestContext } from './helpers/context.ts';
import { createTenant, type TenantFixture, tripBody } from './helpers/fixtures.ts';
import { HttpsReceiver, type Responder, testCa } from './helpers/https-receiver.ts';
import { SmtpReceiver } from './helpers/smtp-receiver.ts';
import { until } from './helpers/until.ts';
import { WorkerMonitor } from './helpers/worker-monitor.ts';

const stripe = new Stripe('sk_test_unused');

for (const backend of BACKENDS) {
  describe(`webhooks end to end (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let receiver: HttpsReceiver;
    let worker: ReturnType<typeof startWorker>;
    let monitor: WorkerMonitor;
    let smtp: SmtpReceiver;

    before(async () => {
      const ca = await testCa();
      smtp = await SmtpReceiver.start();
      ctx = await createTestContext(backend, {
        env: {
          WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
          WEBHOOK_CA_FILE: ca.caFile,
          WEBHOOK_RETRY_SCHEDULE: '30ms,30ms,30ms',
          WEBHOOK_TIMEOUT_MS: '1000',
          WEBHOOK_AUTOPAUSE_FAILURES: '3',
          WEBHOOK_AUTOPAUSE_WINDOW: '1ms',
          SMTP_URL: smtp.url,
        },
      });
      tenant = await createTenant(ctx, { tier: 'pro' });
      // Every test subscribes on its own path: more than the plan's 10 endpoints.
      await ctx.admin('PATCH', `/admin/v1/tenants/${tenant.id}`, { webhookEndpointCap: 50 });
      receiver = await HttpsReceiver.start();
      worker = startWorker(ctx.runtime, { pollIntervalMs: 50 });
      monitor = new WorkerMonitor(worker.worker);
    });
    after(async () => {
      await worker.stop();
      await receiver.close();
      await smtp.close();
      await ctx.close();
    });

    /** A subscription on its own receiver path, so tests do not see each other's requests. */
    async function subscribe(path: string, events: string[], responder?: Responder) {
      const response = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: receiver.url(path), events },
      });
      assert.equal(response.statusCode, 201, response.body);
      if (responder) receiver.respond((r) => (r.path === path ? responder(r) : { status: 200 }));
      return response.json() as { data: { id: string }; signingKey: string };
    }
    const received = (path: string) => receiver.requests.filter((r) => r.path === path);
    const createClient = (displayName: string) =>
      ctx.api('POST', '/api/v1/clients', {
        token: tenant.token,
        body: { kind: 'individual', displayName },
      });
    const deliveries = async (subscriptionId: string, query = '') =>
      (
        await ctx.api('GET', `/api/v1/webhooks/${subscriptionId}/deliveries${query}`, {
          token: tenant.token,
        })
      ).json().data as Array<Record<string, unknown>>;

    it('delivers a signed event exactly as documented', async () => {
      const { data: subscription, signingKey } = await subscribe('/signed', ['client.created']);
      assert.match(signingKey, /^whsec_[A-Za-z0-9_-]{32,}$/);
      const client = (await createClient('Signed Ltd')).json().data;
      const [request] = await until(async () =>
        received('/signed').length > 0 ? received('/signed') : undefined,
      );
      const event = stripe.webhooks.constructEvent(
        request.body,
        String(request.headers['service-signature']),
        signingKey,
      ) as unknown as Record<string, unknown>;
      assert.equal(request.method, 'POST');
      assert.equal(request.headers['content-type'], 'application/json');
      assert.match(String(request.headers['user-agent']), /^Service-Webhooks\/1\.0 /);
      assert.equal(request.headers['service-event-type'], 'client.created');
      assert.equal(request.headers['service-event-id'], event.id);
      assert.match(String(event.id), /^[0-9a-f-]{36}$/);
      assert.equal(request.headers['service-delivery-attempt'], '1');
      assert.equal(event.type, 'client.created');
      assert.deepEqual(event.data, {
        clientId: client.id,
        kind: 'individual',
        displayName: 'Signed Ltd',
        object: client,
        changes: {},
      });
      await monitor.recorded(subscription.id, 'success');
      const [row] = await deliveries(subscription.id);
      assert.equal(request.headers['service-request-id'], `${row.id}.1`);
      assert.equal(row.attempts, 1);
      assert.equal(row.lastResponseStatus, 200);
      assert.ok(row.deliveredAt);
      assert.equal(row.eventId, event.id);
      // `created`: the second of the send, as the attempt log records it.
      const [attempt] = await attemptLog(ctx.runtime.database.db, subscription.id);
      assert.ok(createdWithin(request.body, attempt), `${request.body} ${JSON.stringify(attempt)}`);
      // The key is shown once, and stored only sealed.
      const list = await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token });
      assert.ok(!list.body.includes(signingKey));
      const stored = await ctx.runtime.repositories.webhooks.findSubscription(
        tenant.id,
        subscription.id,
      );
      assert.ok(stored && !stored.signingKey.includes(signingKey.slice(6)));
    });

    it('retries on the cascade until a 2xx, one request id per attempt', async () => {
      let calls = 0;
      const { data: subscription } = await subscribe('/flaky', ['client.created'], () => {
        calls += 1;
        return { status: calls <= 2 ? 503 : 204 };
      });
      await createClient('Flaky');
      await monitor.recorded(subscription.id, 'success');
      const [row] = await deliveries(subscription.id);
      assert.equal(row.attempts, 3);
      const requests = received('/flaky');
      assert.deepEqual(
        requests.map((r) => r.headers['service-request-id']),
        [`${row.id}.1`, `${row.id}.2`, `${row.id}.3`],
      );
      assert.equal(new Set(requests.map((r) => r.headers['service-event-id'])).size, 1);
      const sub = (await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token }))
        .json()
        .data.find((s: { id: string }) => s.id === subscription.id);
      assert.equal(sub.consecutiveFailures, 0);
      assert.ok(sub.lastSuccessAt && sub.lastFailureAt);
    });

    it('dead-letters after the last attempt; redelivery sends the same event again', async () => {
      let fail = true;
      const { data: subscription } = await subscribe('/dead', ['client.created'], () => ({
        status: fail ? 500 : 200,
      }));
      await createClient('Dead');
      await monitor.recorded(subscription.id, 'dead_letter');
      const [dead] = await deliveries(subscription.id);
      assert.equal(dead.attempts, 4);
      assert.equal(dead.lastResponseStatus, 500);
      assert.equal(dead.nextAttemptAt, null);
      assert.equal((await deliveries(subscription.id, '?status=dead_letter')).length, 1);
      assert.equal((await deliveries(subscription.id, '?status=success')).length, 0);

      fail = false;
      const redelivered = await ctx.api(
        'POST',
        `/api/v1/webhooks/${subscription.id}/deliveries/${dead.id}/redeliver`,
        { token: tenant.token },
      );
      assert.equal(redelivered.statusCode, 202);
      const data = redelivered.json().data;
      assert.equal(data.eventId, dead.eventId);
      assert.equal(data.status, 'pending');
      await monitor.recorded(subscription.id, 'success');
      const rows = await deliveries(subscription.id);
      assert.equal(rows[0].id, data.deliveryId);
      assert.equal(rows[0].redeliveredFromId, dead.id);
      assert.equal(rows[0].attempts, 1);
      assert.equal(rows[1].status, 'dead_letter'); // the original is unchanged
      const last = received('/dead').at(-1);
      assert.equal(last?.headers['service-event-id'], dead.eventId);
      assert.equal(last?.headers['service-delivery-attempt'], '1');
    });

    it('refuses to redeliver a row while its attempt runs (409 in_flight)', async () => {
      let hang = true;
      const { data: subscription } = await subscribe('/slow', ['client.created'], () =>
        hang ? 'hang' : { status: 200 },
      );
      await createClient('Slow');
      await monitor.claimed(subscription.id);
      const [row] = await deliveries(subscription.id);
      assert.ok(row.claimedAt);
      const refused = await ctx.api(
        'POST',
        `/api/v1/webhooks/${subscription.id}/deliveries/${row.id}/redeliver`,
        { token: tenant.token },
      );
      assert.equal(refused.statusCode, 409);
      assert.equal(refused.json().code, 'in_flight');
      hang = false;
      // The hung attempt times out (1 s), and the retry succeeds.
      await monitor.recorded(subscription.id, 'success');
    });

    it('signs with both keys for the overlap after a rotation', async () => {
      const { data: subscription, signingKey: oldKey } = await subscribe('/rotated', [
        'client.created',
      ]);
      const rotated = await ctx.api('POST', `/api/v1/webhooks/${subscription.id}/rotate-key`, {
        token: tenant.token,
      });
      assert.equal(rotated.statusCode, 200);
      const { signingKey: newKey, legacySigningKeyExpiresAt } = rotated.json();
      assert.notEqual(newKey, oldKey);
      assert.ok(Date.parse(legacySigningKeyExpiresAt) - Date.now() > 23 * 3600_000);
      await createClient('Rotated');
      const [request] = await until(async () =>
        received('/rotated').length > 0 ? received('/rotated') : undefined,
      );
      const header = String(request.headers['service-signature']);
      assert.equal(header.match(/v1=/g)?.length, 2);
      for (const key of [newKey, oldKey]) {
        assert.ok(stripe.webhooks.constructEvent(request.body, header, key));
      }
    });

    it('takes an empty JSON body as no body where none is needed', async () => {
      const { data: subscription } = await subscribe('/empty-body', ['client.created']);
      const empty = {
        token: tenant.token,
        body: '',
        headers: { 'content-type': 'application/json' },
      };
      const rotated = await ctx.api(
        'POST',
        `/api/v1/webhooks/${subscription.id}/rotate-key`,
        empty,
      );
      assert.equal(rotated.statusCode, 200, rotated.body);
      const fired = await ctx.api('POST', '/api/v1/webhooks/test', empty);
      assert.equal(fired.statusCode, 200, fired.body);
      // A body that is needed is still refused when empty.
      const create = await ctx.api('POST', '/api/v1/webhooks', empty);
      assert.equal(create.statusCode, 422);
      assert.match(create.json().detail, /body is empty/);
    });

    it('fires test events to one or every active subscription, whatever their events', async () => {
      const { data: one } = await subscribe('/test-one', ['trip.published']);
      const single = await ctx.api('POST', '/api/v1/webhooks/test', {
        token: tenant.token,
        body: { subscriptionId: one.id },
      });
      assert.equal(single.statusCode, 200, single.body);
      assert.equal(single.json().data.deliveries, 1);
      const [request] = await until(async () =>
        received('/test-one').length > 0 ? received('/test-one') : undefined,
      );
      const body = JSON.parse(request.body);
      assert.equal(body.type, 'webhook.test');
      assert.equal(body.id, single.json().data.eventId);
      assert.equal(body.data.subscriptionId, one.id);

      const active = (await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token }))
        .json()
        .data.filter((s: { active: boolean }) => s.active).length;
      const all = await ctx.api('POST', '/api/v1/webhooks/test', { token: tenant.token });
      assert.equal(all.statusCode, 200, `${all.body}`);
      assert.equal(all.json().data.deliveries, active);

      const unknown = await ctx.api('POST', '/api/v1/webhooks/test', {
        token: tenant.token,
        body: { subscriptionId: 'whs_01JDZZZZZZZZZZZZZZZZZZZZZZ' },
      });
      assert.equal(unknown.statusCode, 404);
    });

    it('counts a 2xx whose body stalls past the time-out as a failed attempt', async () => {
      const { data: subscription } = await subscribe('/stall', ['client.created'], (r) =>
        r.headers['service-delivery-attempt'] === '1' ? 'stall' : { status: 200 },
      );
      await createClient('Stall');
      await monitor.recorded(subscription.id, 'success');
      const [row] = await deliveries(subscription.id);
      assert.equal(row.attempts, 2);
      assert.equal(received('/stall').length, 2);
    });

    it('fires a sample of any subscribable type on request, signed, marked as a test, valid against its schema', async () => {
      const { data: subscription, signingKey } = await subscribe('/typed', ['client.created']);
      for (const eventType of SUBSCRIBABLE_EVENT_TYPES) {
        const fired = await ctx.api('POST', '/api/v1/webhooks/test', {
          token: tenant.token,
          body: { subscriptionId: subscription.id, eventType },
        });
        assert.equal(fired.statusCode, 200, fired.body);
        assert.equal(fired.json().data.deliveries, 1);
      }
      const requests = await until(async () =>
        received('/typed').length >= SUBSCRIBABLE_EVENT_TYPES.length
          ? received('/typed')
          : undefined,
      );
      assert.deepEqual(
        requests.map((r) => r.headers['service-event-type']).sort(),
        [...SUBSCRIBABLE_EVENT_TYPES].sort(),
      );
      for (const request of requests) {
        const header = String(request.headers['service-signature']);
        const event = stripe.webhooks.constructEvent(request.body, header, signingKey);
        const body = JSON.parse(request.body);
        assert.equal(body.test, true);
        assert.equal(body.type, request.headers['service-event-type']);
        assert.equal(event.id, body.id);
        // The sample is what a real event of the type carries (throws otherwise).
        assertEventData(body.type, body.data);
      }
      // A real event of the same subscription is not marked.
      await createClient('Real one');
      const real = await until(async () =>
        received('/typed').find((r) => !JSON.parse(r.body).test),
      );
      assert.equal(JSON.parse(real.body).type, 'client.created');
      assert.ok(!('test' in JSON.parse(real.body)));
    });

    it('refuses a test fire of webhook.test or an unknown type by name (422 errors.eventType)', async () => {
      for (const eventType of ['webhook.test', 'booking.exploded', '', 7]) {
        const refused = await ctx.api('POST', '/api/v1/webhooks/test', {
          token: tenant.token,
          body: { eventType },
        });
        assert.equal(refused.statusCode, 422, String(eventType));
        assert.ok(refused.json().errors.eventType, refused.body);
      }
    });

    it('counts a typed test fire nowhere, whatever its outcome', async () => {
      const { data: subscription } = await subscribe('/typed-gone', ['booking.confirmed'], () => ({
        status: 410,
      }));
      const fired = await ctx.api('POST', '/api/v1/webhooks/test', {
        token: tenant.token,
        body: { subscriptionId: subscription.id, eventType: 'booking.confirmed' },
      });
      assert.equal(fired.statusCode, 200);
      // Four 410s: enough to pause (3) if a test counted.
      await monitor.recorded(subscription.id, 'dead_letter');
      const after = (await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token }))
        .json()
        .data.find((s: { id: string }) => s.id === subscription.id);
      assert.equal(after.active, true);
      assert.equal(after.consecutiveFailures, 0);
      assert.equal(after.lastFailureAt, null);
    });

    it('leaves test fires out of last24h, redelivered ones too, and counts real events', async () => {
      const { data: subscription } = await subscribe('/tally', ['client.created']);
      const last24h = async () =>
        (await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token }))
          .json()
          .data.find((s: { id: string }) => s.id === subscription.id).last24h;
      const succeeded = (n: number) =>
        until(
          async () =>
            (await deliveries(subscription.id, '?status=success')).length === n || undefined,
        );
      await ctx.api('POST', '/api/v1/webhooks/test', {
        token: tenant.token,
        body: { subscriptionId: subscription.id, eventType: 'client.created' },
      });
      await succeeded(1);
      const [test] = await deliveries(subscription.id);
      const redelivered = await ctx.api(
        'POST',
        `/api/v1/webhooks/${subscription.id}/deliveries/${test.id}/redeliver`,
        { token: tenant.token },
      );
      assert.equal(redelivered.statusCode, 202);
      await succeeded(2);
      assert.deepEqual(await last24h(), { succeeded: 0, deadLettered: 0, pending: 0 });
      await createClient('Counted');
      await succeeded(3);
      assert.deepEqual(await last24h(), { succeeded: 1, deadLettered: 0, pending: 0 });
    });

    it('leaves the subscription as it was after a test fire, whatever the outcome', async () => {
      const { data: subscription } = await subscribe('/test-gone', ['trip.published'], () => ({
        status: 410,
      }));
      const fired = await ctx.api('POST', '/api/v1/webhooks/test', {
        token: tenant.token,
        body: { subscriptionId: subscription.id },
      });
      assert.equal(fired.statusCode, 200);
      // Four 410s: enough to pause (3) if a test counted.
      await monitor.recorded(subscription.id, 'dead_letter');
      const [row] = await deliveries(subscription.id);
      assert.equal(row.attempts, 4);
      assert.equal(row.lastResponseStatus, 410);
      const after = (await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token }))
        .json()
        .data.find((s: { id: string }) => s.id === subscription.id);
      assert.equal(after.active, true);
      assert.equal(after.pausedAt, null);
      assert.equal(after.consecutiveFailures, 0);
      assert.equal(after.lastFailureAt, null);
    });

    it('auto-pauses after consecutive 4xx, notifies owners and admins, resumes on enable', async () => {
      const admin = await ctx.admin('POST', `/admin/v1/tenants/${tenant.id}/members`, {
        email: 'ops@example.test',
        role: 'admin',
      });
      let status = 404;
      const { data: subscription } = await subscribe('/gone', ['client.created'], () => ({
        status,
      }));
      await createClient('Gone 1');
      await monitor.paused(subscription.id);
      const paused = (await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token }))
        .json()
        .data.find((s: { id: string }) => s.id === subscription.id);
      assert.equal(paused.active, false);
      assert.ok(paused.pausedAt);
      assert.equal(paused.pauseReason, 'consecutive_failures');
      assert.equal(paused.consecutiveFailures, 3);
      const notices = (
        await ctx.admin<{ data: Array<Record<string, unknown>> }>(
          'GET',
          `/admin/v1/tenants/${tenant.id}/notifications`,
        )
      ).data.filter((n) => n.subscriptionId === subscription.id);
      assert.deepEqual(
        notices.map((n) => n.recipient).sort(),
        [
          'ops@example.test',
          ...notices.map((n) => n.recipient).filter((r) => r !== 'ops@example.test'),
        ].sort(),
      );
      assert.ok(notices.length >= 2, 'the owner and the admin');
      assert.ok(admin);
      // SMTP_URL is set: one email to all of them, naming the subscription and how to resume.
      const mail = await until(async () =>
        smtp.messages.find((m) => m.raw.includes(subscription.id)),
      );
      assert.deepEqual(mail.rcptTo.sort(), notices.map((n) => n.recipient).sort());
      assert.match(mail.raw, /Subject: Webhook endpoint paused: https:\/\/127\.0\.0\.1:\d+\/gone/);
      assert.match(mail.raw, /tourops webhooks enable/);
      // Queued deliveries stay pending while paused, and nothing is sent: shown by a marker, a
      // delivery of the same event to another endpoint, claimed by a claim that saw the paused
      // endpoint's row of it due.
      const sentWhilePaused = received('/gone').length;
      const marker = await subscribe('/gone-marker', ['client.created']);
      await createClient('Gone marker');
      await monitor.recorded(marker.data.id, 'success');
      assert.equal(received('/gone').length, sentWhilePaused);
      const queued = await deliveries(subscription.id);
      assert.deepEqual(
        queued.map((row) => row.status),
        queued.map(() => 'pending'),
      );
      await ctx.api('DELETE', `/api/v1/webhooks/${marker.data.id}`, { token: tenant.token });
      // Test fire at a paused subscription: 422.
      const test = await ctx.api('POST', '/api/v1/webhooks/test', {
        token: tenant.token,
        body: { subscriptionId: subscription.id },
      });
      assert.equal(test.statusCode, 422);

      status = 200;
      const enabled = await ctx.admin<{ data: Record<string, unknown> }>(
        'POST',
        `/admin/v1/webhooks/${subscription.id}/enable`,
      );
      assert.equal(enabled.data.active, true);
      assert.equal(enabled.data.pausedAt, null);
      assert.equal(enabled.data.pauseReason, null);
      assert.equal(enabled.data.consecutiveFailures, 0);
      await monitor.recorded(subscription.id, 'success');
    });

    it('pauses at a 410 Gone after one attempt, keeps the delivery, and tells the other endpoints', async () => {
      const paths = { gone: '/op-gone', watcher: '/op-watcher' };
      const gone = await subscribe(paths.gone, ['client.created', 'webhook.endpoint.paused']);
      const watcher = await subscribe(paths.watcher, ['webhook.endpoint.paused']);
      receiver.respond((r) => (r.path === paths.gone ? { status: 410 } : { status: 200 }));
      await createClient('Gone for good');
      await monitor.paused(gone.data.id);
      const shown = (await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token }))
        .json()
        .data.find((s: { id: string }) => s.id === gone.data.id);
      assert.equal(shown.active, false);
      assert.equal(shown.pauseReason, 'gone');
      assert.equal(shown.deliveryState.reason, 'paused');
      assert.equal(received(paths.gone).length, 1, 'one attempt, no retry');
      const [kept] = await deliveries(gone.data.id);
      assert.equal(kept.status, 'pending');
      assert.equal(kept.attempts, 1);

      const [announcement] = await until(async () =>
        received(paths.watcher).length > 0 ? received(paths.watcher) : undefined,
      );
      const event = stripe.webhooks.constructEvent(
        announcement.body,
        String(announcement.headers['service-signature']),
        watcher.signingKey,
      ) as unknown as { type: string; data: Record<string, unknown>; sequence: number };
      assert.equal(event.type, 'webhook.endpoint.paused');
      assert.deepEqual(event.data, {
        subscriptionId: gone.data.id,
        url: receiver.url(paths.gone),
        reason: 'gone',
      });
      assert.equal(event.sequence, 1, 'numbered in the watcher sequence like any event');
      // Owners are told as for an auto-pause.
      const mail = await until(async () =>
        smtp.messages.find((m) => m.raw.includes(gone.data.id) && m.raw.includes('410 Gone')),
      );
      assert.ok(mail);
      // Enabled again: the kept delivery goes, and the paused endpoint never got its own news.
      // The receiver takes it from before the enable: the PATCH answers only after reads that
      // follow its commit, and the worker may send meanwhile.
      receiver.respond(() => ({ status: 200 }));
      await ctx.api('PATCH', `/api/v1/webhooks/${gone.data.id}`, {
        token: tenant.token,
        body: { active: true },
      });
      await monitor.recorded(gone.data.id, 'success');
      assert.deepEqual(
        received(paths.gone).map((r) => r.headers['service-event-type']),
        ['client.created', 'client.created'],
      );
    });

    it('announces a dead letter once to the other endpoints, never to its own; never of an announcement', async () => {
      const paths = { failing: '/op-failing', watcher: '/op-dead-watcher', broken: '/op-broken' };
      const failing = await subscribe(paths.failing, [
        'trip.published',
        'webhook.delivery.dead_lettered',
      ]);
      const watcher = await subscribe(paths.watcher, ['webhook.delivery.dead_lettered']);
      // Its announcements fail for good too: their dead letters must announce nothing.
      const broken = await subscribe(paths.broken, ['webhook.delivery.dead_lettered']);
      receiver.respond((r) =>
        r.path === paths.failing || r.path === paths.broken ? { status: 500 } : { status: 200 },
      );
      const trip = await ctx.api('POST', '/api/v1/trips', {
        token: tenant.token,
        body: tripBody(tenant, { title: 'Dead letter tour' }),
      });
      assert.equal(trip.statusCode, 201, trip.body);
      await ctx.admin('POST', `/admin/v1/trips/${trip.json().data.id}/publish`);
      await monitor.recorded(failing.data.id, 'dead_letter');
      const [lost] = await deliveries(failing.data.id);
      // The broken endpoint's copy of the announcement is given up too.
      await monitor.recorded(broken.data.id, 'dead_letter');
      // An announcement is emitted in the transaction that records its dead letter, so both are
      // in the watcher's deliveries by now: exactly one, and it has arrived once recorded.
      const announcements = await deliveries(watcher.data.id);
      assert.equal(announcements.length, 1, JSON.stringify(announcements));
      await monitor.recorded(watcher.data.id, 'success');

      const announced = received(paths.watcher).map((r) => JSON.parse(r.body));
      assert.equal(announced.length, 1, JSON.stringify(announced));
      assert.equal(announced[0].type, 'webhook.delivery.dead_lettered');
      assert.deepEqual(announced[0].data, {
        subscriptionId: failing.data.id,
        deliveryId: lost.id,
        eventId: lost.eventId,
        eventType: 'trip.published',
        attempts: 4,
      });
      assert.deepEqual(
        received(paths.failing).map((r) => r.headers['service-event-type']),
        Array(4).fill('trip.published'),
        'never told of its own dead letter',
      );
      receiver.respond(() => ({ status: 200 }));
    });

    it('soft-deletes: listed inactive with its history, then 404 for delete and rotate, 409 for redeliver', async () => {
      const { data: subscription } = await subscribe('/deleted', ['client.created']);
      await createClient('Before delete');
      await monitor.recorded(subscription.id, 'success');
      const [row] = await deliveries(subscription.id);
      const headers = { 'idempotency-key': `delete-${subscription.id}` };
      const url = `/api/v1/webhooks/${subscription.id}`;
      const deleted = await ctx.api('DELETE', url, { token: tenant.token, headers });
      assert.equal(deleted.statusCode, 204);
      assert.equal(deleted.body, '');
      const replay = await ctx.api('DELETE', url, { token: tenant.token, headers });
      assert.equal(replay.statusCode, 204);
      assert.equal(replay.headers['idempotency-replayed'], 'true');
      assert.equal((await ctx.api('DELETE', url, { token: tenant.token })).statusCode, 404);
      const rotate = await ctx.api('POST', `${url}/rotate-key`, { token: tenant.token });
      assert.equal(rotate.statusCode, 404);
      const listed = (await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token }))
        .json()
        .data.find((s: { id: string }) => s.id === subscription.id);
      assert.equal(listed.active, false);
      assert.ok(listed.pausedAt);
      // The one subscription is the list's item, deleted too.
      const one = await ctx.api('GET', url, { token: tenant.token });
      assert.equal(one.statusCode, 200, one.body);
      assert.deepEqual(one.json().data, listed);
      assert.equal((await deliveries(subscription.id)).length, 1);
      const redeliver = await ctx.api('POST', `${url}/deliveries/${row.id}/redeliver`, {
        token: tenant.token,
      });
      assert.equal(redeliver.statusCode, 409);
      assert.equal(redeliver.json().code, 'subscription_inactive');
      const enable = await ctx.adminRequest('POST', `/admin/v1/webhooks/${subscription.id}/enable`);
      assert.equal(enable.statusCode, 404);
    });

    it("hides another tenant's subscriptions and deliveries (404)", async () => {
      const { data: subscription } = await subscribe('/private', ['client.created']);
      const other = await createTenant(ctx, { tier: 'pro' });
      const base = `/api/v1/webhooks/${subscription.id}`;
      for (const [method, url] of [
        ['GET', base],
        ['GET', `${base}/deliveries`],
        ['DELETE', base],
        ['POST', `${base}/rotate-key`],
        ['POST', `${base}/deliveries/dlv_01JDZZZZZZZZZZZZZZZZZZZZZZ/redeliver`],
      ] as const) {
        const response = await ctx.api(method, url, { token: other.token });
        assert.equal(response.statusCode, 404, `${method} ${url}`);
      }
      const list = await ctx.api('GET', '/api/v1/webhooks', { token: other.token });
      assert.deepEqual(list.json().data, []);
      // The owner's view of it is the list's item, live.
      const mine = await ctx.api('GET', base, { token: tenant.token });
      const listed = (await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token }))
        .json()
        .data.find((s: { id: string }) => s.id === subscription.id);
      assert.deepEqual(mine.json().data, listed);
    });

    it('validates subscriptions: events, URL shape, plan and endpoint cap', async () => {
      const post = (body: unknown, token = tenant.token) =>
        ctx.api('POST', '/api/v1/webhooks', { token, body });
      const url = receiver.url('/validated');
      const cases: Array<[unknown, string]> = [
        [{ url, events: ['webhook.test'] }, 'events.0'],
        [{ url, events: ['booking.exploded'] }, 'events.0'],
        [{ url, events: [] }, 'events'],
        [{ url: url.replace('https:', 'http:'), events: ['client.created'] }, 'url'],
        [{ url: `https://example.test/${'x'.repeat(2048)}`, events: ['client.created'] }, 'url'],
      ];
      for (const [body, field] of cases) {
        const response = await post(body);
        assert.equal(response.statusCode, 422, JSON.stringify(body).slice(0, 80));
        assert.ok(response.json().errors[field], `${field}: ${response.body}`);
      }
      const starter = await createTenant(ctx, { tier: 'starter' });
      const off = await post({ url, events: ['client.created'] }, starter.token);
      assert.equal(off.statusCode, 403);
      assert.equal(off.json().code, 'feature_off_for_tier');

      const capped = await createTenant(ctx, { tier: 'pro' });
      await ctx.admin('PATCH', `/admin/v1/tenants/${capped.id}`, { webhookEndpointCap: 1 });
      assert.equal((await post({ url, events: ['client.created'] }, capped.token)).statusCode, 201);
      const full = await post({ url, events: ['client.created'] }, capped.token);
      assert.equal(full.statusCode, 403);
      assert.equal(full.json().code, 'webhook_quota_exceeded');
    });
  });
}

describe('the per-subscription cap on attempts in flight', () => {
  let ctx: TestContext;
  let receiver: HttpsReceiver;
  let worker: ReturnType<typeof startWorker>;

  before(async () => {
    const ca = await testCa();
    // A long time-out: no attempt may end early and free its slot under a loaded machine.
    ctx = await createTestContext('sqlite', {
      env: {
        WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
        WEBHOOK_CA_FILE: ca.caFile,
        WEBHOOK_TIMEOUT_MS: '30000',
      },
    });
    receiver = await HttpsReceiver.start();
    worker = startWorker(ctx.runtime, { pollIntervalMs: 50, maxPerSubscription: 4 });
  });
  after(async () => {
    await worker.stop();
    await receiver.close();
    await ctx.close();
  });

  it('never runs more attempts at once to one subscription than the cap, and delivers the rest after', async () => {
    const tenant = await createTenant(ctx, { tier: 'pro' });
    const created = await ctx.api('POST', '/api/v1/webhooks', {
      token: tenant.token,
      body: { url: receiver.url('/busy'), events: ['client.created'] },
    });
    assert.equal(created.statusCode, 201, created.body);
    // The first answers are held until three requests are open at once (more than one claim's
    // share, for sure), the later ones answered a little late so that claims overlap; the
    // receiver counts a request open until its answer has left.
    let openGate = () => {};
    const gate = new Promise<void>((resolve) => {
      openGate = resolve;
    });
    let gateOpen = false;
    receiver.respond(() => {
      if (receiver.openRequests >= 3) {
        openGate();
        gateOpen = true;
      }
      return gateOpen ? { status: 200, delayMs: 100 } : { status: 200, after: gate };
    });
    const count = 12;
    for (let i = 0; i < count; i++) {
      const response = await ctx.api('POST', '/api/v1/clients', {
        token: tenant.token,
        body: { kind: 'individual', displayName: `Busy ${i}` },
      });
      assert.equal(response.statusCode, 201);
    }
    await receiver.waitFor(count);
    assert.equal(receiver.requests.length, count, 'each once');
    const most = receiver.mostOpenRequests;
    assert.ok(most >= 3 && most <= 4, `${most} open at once at the receiver`);
    // And in the product's own record: no moment with more than four attempts under way.
    const log = await until(async () => {
      const rows = await attemptLog(ctx.runtime.database.db, created.json().data.id);
      return rows.length === count ? rows : undefined;
    });
    const overlapping = log.map(
      (a) => log.filter((b) => b.startMs <= a.startMs && b.endMs > a.startMs).length,
    );
    assert.ok(Math.max(...overlapping) <= 4, `attempts under way at once: ${overlapping}`);
  });
});

describe('webhook address guard at registration', () => {
  let ctx: TestContext;
  before(async () => {
    // Injected DNS answers; no connection is ever made by registering.
    ctx = await createTestContext('sqlite', {
      resolver: async (host) =>
        ({
          'public.example.test': ['93.184.216.34'],
          'mixed.example.test': ['93.184.216.34', '10.1.2.3'],
          'cgnat.example.test': ['100.64.0.7'],
        })[host] ?? [],
    });
  });
  after(() => ctx.close());

  it('refuses private, loopback, link-local, CGNAT, IPv6 local and mapped addresses', async () => {
    const tenant = await createTenant(ctx, { tier: 'pro' });
    for (const host of [
      '127.0.0.1',
      '10.0.0.1',
      '192.168.1.1',
      '172.16.0.1',
      '169.254.169.254',
      '100.64.0.1',
      '[::1]',
      '[fe80::1]',
      '[fd00::1]',
      '[::ffff:127.0.0.1]',
      'mixed.example.test',
      'cgnat.example.test',
      'nowhere.example.test',
    ]) {
      const response = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: `https://${host}/hook`, events: ['client.created'] },
      });
      assert.equal(response.statusCode, 422, host);
      assert.ok(response.json().errors.url, host);
    }
    const ok = await ctx.api('POST', '/api/v1/webhooks', {
      token: tenant.token,
      body: { url: 'https://public.example.test/hook', events: ['trip.published'] },
    });
    assert.equal(ok.statusCode, 201, ok.body);
  });
});
