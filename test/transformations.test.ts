import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { SUBSCRIBABLE_EVENT_TYPES } from '../src/domain/states.ts';
import { startWorker } from '../src/start-worker.ts';
import { attemptLog } from './helpers/attempt-log.ts';
import { ManualClock } from './helpers/clock.ts';
import { BACKENDS, createWebhookTestContext, type TestContext } from './helpers/context.ts';
import { deliveryRows } from './helpers/delivery-rows.ts';
import {
  createSubscription,
  createTenant,
  emitSample,
  type TenantFixture,
} from './helpers/fixtures.ts';
import { HttpsReceiver } from './helpers/https-receiver.ts';
import { eventually } from './helpers/until.ts';

// Transformations end to end: set on a subscription (422 for code that cannot run), run by the
// real worker before each attempt against a real HTTPS receiver, and tried by the dry run, whose
// answers must be what the deliveries sent, byte for byte, over every event type. The clock is a
// manual one, held still: the body's `created` and the sandbox's clock read the same second in
// the dry run and in the delivery.

type Row = Record<string, unknown>;

/** Reshapes every type but `trip.updated`, which it cancels; adds a header, moves the path. */
const RESHAPE = `
function handler(webhook) {
  if (webhook.type === 'trip.updated') return { ...webhook, cancel: true };
  webhook.payload = {
    text: webhook.type + ' ' + webhook.payload.id,
    at: new Date().toISOString(),
    sequence: webhook.payload.sequence,
    original: webhook.payload,
  };
  webhook.headers['x-partner-format'] = 'v2';
  webhook.url = webhook.url.replace('/hook', '/partner');
  return webhook;
}`;

for (const backend of BACKENDS) {
  describe(`transformations (${backend})`, () => {
    // Held still at a whole second of now: the verifier holds the timestamp to its tolerance.
    const clock = new ManualClock(new Date(Math.floor(Date.now() / 1000) * 1000));
    let ctx: TestContext;
    let tenant: TenantFixture;
    let receiver: HttpsReceiver;
    let worker: ReturnType<typeof startWorker>;

    before(async () => {
      ctx = await createWebhookTestContext(backend, {}, { clock });
      tenant = await createTenant(ctx, { tier: 'enterprise' });
      receiver = await HttpsReceiver.start();
      worker = startWorker(ctx.runtime, { pollIntervalMs: 20 });
    });
    after(async () => {
      await worker.stop();
      await receiver.close();
      await ctx.close();
    });

    const api = (method: 'POST' | 'PATCH' | 'GET', url: string, body?: Row) =>
      ctx.api(method, url, { token: tenant.token, body });
    const emitted = (type: (typeof SUBSCRIBABLE_EVENT_TYPES)[number]) =>
      emitSample(ctx.runtime, tenant.id, type, clock.now());

    it('refuses code that cannot run, at write and in the dry run, naming its line', async () => {
      const cases: Array<[string, RegExp]> = [
        ['function handler(webhook) {\n  return webhook +;\n}', /SyntaxError.*\(line 2\)/],
        ['const x = 1;', /defines no function handler/],
        ['throw new Error("at load")', /Error: at load/],
        ['for (;;) {}', /ran longer than 100 ms/],
        [`// ${'x'.repeat(64 * 1024)}\nfunction handler(w) { return w }`, /65536/],
      ];
      for (const [code, message] of cases) {
        const created = await api('POST', '/api/v1/webhooks', {
          url: receiver.url('/hook'),
          events: ['client.created'],
          transformation: { code },
        });
        assert.equal(created.statusCode, 422, created.body);
        const [fault] = created.json().errors['transformation.code'];
        assert.match(fault, message);
        const dryRun = await api('POST', '/api/v1/webhooks/transformations/test', {
          code,
          event: { type: 'client.created', data: {} },
        });
        assert.equal(dryRun.statusCode, 422, dryRun.body);
        assert.match(dryRun.json().errors.code[0], message);
      }
      const listed = (await api('GET', '/api/v1/webhooks')).json().data as Row[];
      assert.equal(listed.length, 0, 'nothing was stored');
    });

    it('refuses retry schedules out of bounds, keyed by the wait', async () => {
      const cases: Array<[unknown, string, RegExp]> = [
        [[], 'retrySchedule', /fewer than 1/],
        [Array(11).fill('1m'), 'retrySchedule', /more than 10/],
        [['30s', '500ms'], 'retrySchedule.1', /from 1s to 24h/],
        [['25h'], 'retrySchedule.0', /from 1s to 24h/],
        [['soon'], 'retrySchedule.0', /not a duration/],
      ];
      for (const [retrySchedule, key, message] of cases) {
        const created = await api('POST', '/api/v1/webhooks', {
          url: receiver.url('/hook'),
          events: ['client.created'],
          retrySchedule,
        });
        assert.equal(created.statusCode, 422, created.body);
        const errors = created.json().errors as Record<string, string[]>;
        assert.ok(
          errors[key]?.some((m) => message.test(m)),
          `${JSON.stringify(retrySchedule)}: ${created.body}`,
        );
      }
    });

    it('the dry run answers what each delivery sent, byte for byte, over every event type', async () => {
      const events = [...SUBSCRIBABLE_EVENT_TYPES];
      const made = await createSubscription(ctx, tenant, receiver.url('/hook'), {
        events,
        standardWebhooks: true,
        transformation: { code: RESHAPE },
        retrySchedule: ['10s', '1m'],
      });
      const id = made.data.id as string;
      assert.deepEqual(made.data.transformation, { code: RESHAPE }, 'read back as written');
      assert.deepEqual(made.data.retrySchedule, ['10s', '1m']);
      for (const type of events) await emitted(type);
      const cancelled = events.filter((type) => type === 'trip.updated').length;
      const settled = async () =>
        (
          await deliveryRows(ctx.runtime.database.db)
            .select('id')
            .where('subscriptionId', '=', id)
            .where('status', '=', 'success')
            .execute()
        ).length;
      await eventually(async () => (await settled()) === events.length, 'every delivery settled');
      assert.equal(
        receiver.requests.length,
        events.length - cancelled,
        'the cancelled one not sent',
      );
      const dryRun = await api('POST', '/api/v1/webhooks/transformations/test', {
        code: RESHAPE,
        subscriptionId: id,
      });
      assert.equal(dryRun.statusCode, 200, dryRun.body);
      const answers = dryRun.json().data.events as Array<{
        id: string;
        type: string;
        result?: {
          payload: unknown;
          url: string;
          headers: Record<string, string>;
          cancel: boolean;
        };
        error?: string;
      }>;
      assert.equal(answers.length, events.length);
      const verifier = new Webhook(made.signingKey.slice('whsec_'.length));
      for (const answer of answers) {
        assert.ok(answer.result, `${answer.type}: ${answer.error}`);
        const sent = receiver.requests.find((r) => r.headers['service-event-id'] === answer.id);
        if (answer.result.cancel) {
          assert.equal(sent, undefined, `${answer.type} was cancelled: nothing sent`);
          continue;
        }
        assert.ok(sent, `${answer.type} was sent`);
        assert.equal(sent.body, JSON.stringify(answer.result.payload), `${answer.type}: the body`);
        assert.equal(`https://127.0.0.1:${receiver.port}${sent.path}`, answer.result.url);
        for (const [name, value] of Object.entries(answer.result.headers)) {
          assert.equal(sent.headers[name], value, `${answer.type}: header ${name}`);
        }
        // What is signed is the transformed body, as sent.
        verifier.verify(sent.body, {
          'webhook-id': String(sent.headers['webhook-id']),
          'webhook-timestamp': String(sent.headers['webhook-timestamp']),
          'webhook-signature': String(sent.headers['webhook-signature']),
        });
      }
      const attempts = await ctx.runtime.database.db
        .selectFrom('webhookAttempts as a')
        .innerJoin('webhookDeliveries as d', 'd.id', 'a.deliveryId')
        .select(['d.eventType', 'a.cancelled', 'a.status'])
        .where('d.subscriptionId', '=', id)
        .execute();
      assert.deepEqual(
        attempts.filter((a) => a.cancelled).map((a) => [a.eventType, a.status]),
        [['trip.updated', null]],
        'the attempt log says which was cancelled, with no status',
      );
      const shown = await api('GET', `/api/v1/webhooks/${id}/deliveries?limit=100`);
      assert.equal(shown.statusCode, 200, shown.body);
    });
  });
}

for (const backend of BACKENDS) {
  describe(`retry schedules and failing transformations (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let other: TenantFixture;
    let receiver: HttpsReceiver;

    before(async () => {
      // The deployment's schedule would not retry within the test: what retries is the
      // subscription's own.
      ctx = await createWebhookTestContext(backend, { WEBHOOK_RETRY_SCHEDULE: '1h' });
      tenant = await createTenant(ctx, { tier: 'enterprise' });
      other = await createTenant(ctx, { tier: 'enterprise' });
      receiver = await HttpsReceiver.start({
        responder: (r) => ({ status: r.path === '/failing' ? 500 : 204 }),
      });
    });
    after(async () => {
      await receiver.close();
      await ctx.close();
    });

    const deliveries = (subscriptionId: string) =>
      deliveryRows(ctx.runtime.database.db)
        .select(['id', 'status', 'attempts', 'lastError'])
        .where('subscriptionId', '=', subscriptionId)
        .execute();
    const emitted = (t: TenantFixture) => emitSample(ctx.runtime, t.id, 'client.created');

    it('waits exactly its own schedule between attempts, to the second, through a worker restart', async () => {
      const waits = [1000, 2000, 1000];
      const made = await createSubscription(ctx, tenant, receiver.url('/failing'), {
        retrySchedule: ['1s', '2s', '1s'],
      });
      const id = made.data.id as string;
      let worker = startWorker(ctx.runtime, { pollIntervalMs: 20 });
      await emitted(tenant);
      await eventually(async () => (await attemptLog(ctx.runtime.database.db, id)).length >= 2);
      // Between the second attempt and the third: a new worker takes over.
      await worker.stop();
      worker = startWorker(ctx.runtime, { pollIntervalMs: 20 });
      try {
        await eventually(
          async () => (await deliveries(id))[0]?.status === 'dead_letter',
          'dead-lettered after its last attempt',
        );
      } finally {
        await worker.stop();
      }
      const [delivery] = await deliveries(id);
      assert.equal(delivery.attempts, waits.length + 1, 'attempts = waits + 1');
      const log = await attemptLog(ctx.runtime.database.db, id);
      assert.equal(log.length, waits.length + 1);
      for (const [i, wait] of waits.entries()) {
        const gap = log[i + 1].startMs - log[i].endMs;
        // The log keeps whole milliseconds; the next attempt is due `wait` after the answer.
        assert.ok(
          gap >= wait - 2,
          `attempt ${i + 2} came ${gap} ms after the answer, before ${wait}`,
        );
        assert.ok(gap < wait + 1000, `attempt ${i + 2} came ${gap} ms after the answer: late`);
      }
    });

    it('a failing transformation fails the attempt, retries, dead-letters; another tenant is served', async () => {
      const hostile = await createSubscription(ctx, tenant, receiver.url('/hostile'), {
        transformation: {
          code: 'function handler(webhook) {\n  while (true) {}\n}',
        },
        retrySchedule: ['1s', '1s'],
      });
      const plain = await createSubscription(ctx, other, receiver.url('/plain'));
      const hostileId = hostile.data.id as string;
      const plainId = plain.data.id as string;
      const worker = startWorker(ctx.runtime, { pollIntervalMs: 20 });
      try {
        await emitted(tenant);
        for (let i = 0; i < 5; i++) await emitted(other);
        await eventually(
          async () => (await deliveries(hostileId))[0]?.status === 'dead_letter',
          'the hostile delivery dead-lettered',
        );
        await eventually(
          async () => (await deliveries(plainId)).every((d) => d.status === 'success'),
          "the other tenant's deliveries delivered",
        );
      } finally {
        await worker.stop();
      }
      assert.equal(
        receiver.requests.filter((r) => r.path === '/hostile').length,
        0,
        'nothing was sent',
      );
      const [delivery] = await deliveries(hostileId);
      assert.equal(delivery.lastError, 'transformation_failed');
      const attempts = await ctx.api(
        'GET',
        `/api/v1/webhooks/${hostileId}/deliveries/${delivery.id}/attempts`,
        { token: tenant.token },
      );
      assert.equal(attempts.statusCode, 200, attempts.body);
      const rows = attempts.json().data as Row[];
      assert.equal(rows.length, 3);
      for (const row of rows) {
        assert.equal(row.errorClass, 'transformation_failed');
        assert.equal(row.status, null);
        assert.equal(row.cancelled, false);
        // A retry while its code rests after a run to the cap is refused unrun (see REST_FACTOR).
        assert.match(
          String(row.responseBody),
          /^(ran longer than 100 ms \(the time cap of one run\)|not run: this code's runs reach the time cap)/,
        );
      }
      assert.match(String(rows.at(-1)?.responseBody), /^ran longer than 100 ms/, 'the first ran');
    });
  });
}
