import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { sampleEventData } from '../src/domain/event-samples.ts';
import { SUBSCRIBABLE_EVENT_TYPES } from '../src/domain/states.ts';
import { startWorker } from '../src/start-worker.ts';
import { ManualClock } from './helpers/clock.ts';
import { BACKENDS, createWebhookTestContext, type TestContext } from './helpers/context.ts';
import { createSubscription, createTenant, type TenantFixture } from './helpers/fixtures.ts';
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
    const emitted = async (type: (typeof SUBSCRIBABLE_EVENT_TYPES)[number]) =>
      ctx.runtime.database.withTransaction(() =>
        ctx.runtime.services.events.emit(tenant.id, type, sampleEventData(type, clock.now())),
      );

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
          await ctx.runtime.database.db
            .selectFrom('webhookDeliveries')
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
