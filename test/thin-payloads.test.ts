import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { isThinEvent, type ThinWebhookEvent, verifyWebhook } from '../sdk/src/index.ts';
import { SUBSCRIBABLE_EVENT_TYPES } from '../src/domain/states.ts';
import { thinPayloadTable } from '../src/domain/thin-payload.ts';
import { startWorker } from '../src/start-worker.ts';
import { BACKENDS, createWebhookTestContext, type TestContext } from './helpers/context.ts';
import {
  createBooking,
  createSubscription,
  createTenant,
  mintToken,
  type TenantFixture,
} from './helpers/fixtures.ts';
import { HttpsReceiver, type ReceivedRequest } from './helpers/https-receiver.ts';
import { eventually } from './helpers/until.ts';

// Thin bodies (a subscription's `payload: thin`): ids and the names of what changed, checked
// against the catalog's thin schemas and against the full body of the same event, which
// `GET /api/v1/events/{id}` gives under the read scope of the event's resource.

type Row = Record<string, unknown>;
interface Body {
  id: string;
  type: string;
  created: number;
  test?: true;
  sequence?: number;
  data: Row;
}

/** What a thin `data` must be, derived here from the full one as a receiver reads the rule. */
const expectedThin = (full: Row): Row => ({
  ...Object.fromEntries(Object.entries(full).filter(([name]) => /Id$/.test(name))),
  changed: Object.keys((full.changes as Row | undefined) ?? {}),
});

for (const backend of BACKENDS) {
  describe(`thin payloads (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let other: TenantFixture;
    let receiver: HttpsReceiver;
    let worker: ReturnType<typeof startWorker>;
    let full: { id: string; key: string };
    let thin: { id: string; key: string };

    before(async () => {
      ctx = await createWebhookTestContext(backend);
      tenant = await createTenant(ctx, { tier: 'enterprise' });
      other = await createTenant(ctx, { tier: 'enterprise' });
      receiver = await HttpsReceiver.start();
      const events = [...SUBSCRIBABLE_EVENT_TYPES];
      const a = await createSubscription(ctx, tenant, receiver.url('/full'), { events });
      const b = await createSubscription(ctx, tenant, receiver.url('/thin'), {
        events,
        payload: 'thin',
        standardWebhooks: true,
      });
      full = { id: a.data.id as string, key: a.signingKey };
      thin = { id: b.data.id as string, key: b.signingKey };
      assert.equal(a.data.payload, 'full');
      assert.equal(b.data.payload, 'thin');
      worker = startWorker(ctx.runtime, { pollIntervalMs: 20 });
    });
    after(async () => {
      await worker.stop();
      await receiver.close();
      await ctx.close();
    });

    const at = (path: string) => receiver.requests.filter((r) => r.path === path);
    const bodyOf = (request: ReceivedRequest) => JSON.parse(request.body) as Body;
    const eventBody = (id: string, token = tenant.token) =>
      ctx.api('GET', `/api/v1/events/${id}`, { token });
    const thinValidators = async () => {
      const catalog = (await ctx.api('GET', '/api/v1/event-types', { token: tenant.token })).json()
        .data as Array<{ type: string; thinSchema: object }>;
      const ajv = addFormats.default(new Ajv2020.default({ strict: false }));
      return new Map(catalog.map((entry) => [entry.type, ajv.compile(entry.thinSchema)]));
    };

    /** Each thin body against its schema, its signature, and the full body of its event. */
    const checkPairs = async (fullRequests: ReceivedRequest[], thinRequests: ReceivedRequest[]) => {
      const validators = await thinValidators();
      const fullById = new Map(fullRequests.map((r) => [bodyOf(r).id, bodyOf(r)]));
      assert.equal(thinRequests.length, fullRequests.length);
      for (const request of fullRequests) {
        const headers = request.headers as Record<string, string>;
        assert.ok(!isThinEvent(verifyWebhook(request.body, headers, full.key)));
      }
      for (const request of thinRequests) {
        const event = verifyWebhook<ThinWebhookEvent>(
          request.body,
          request.headers as Record<string, string>,
          thin.key,
        );
        assert.ok(isThinEvent(event), event.type);
        const body = bodyOf(request);
        const validate = validators.get(body.type);
        assert.ok(validate?.(body), `${body.type}: ${JSON.stringify(validate?.errors)}`);
        const fullBody = fullById.get(body.id) as Body;
        assert.ok(fullBody, `the full subscription got ${body.id} too`);
        assert.deepEqual(body.data, expectedThin(fullBody.data), body.type);
        assert.deepEqual(Object.keys(body).sort(), Object.keys(fullBody).sort(), body.type);
        // No value of the full data but its ids reaches the thin body.
        for (const [name, value] of Object.entries(fullBody.data)) {
          if (/Id$/.test(name) || typeof value !== 'string' || value.length < 4) continue;
          const shown = JSON.stringify(body.data).includes(JSON.stringify(value));
          assert.ok(!shown, `${body.type}: ${name} is not in the thin data`);
        }
        const fetched = await eventBody(body.id);
        assert.equal(fetched.statusCode, 200, fetched.body);
        const { sequence: _sequence, created: _created, ...rest } = fullBody;
        const { created, ...shown } = fetched.json().data as Body;
        assert.deepEqual(shown, rest, `${body.type}: GET /events/{id} is the full body`);
        assert.ok(Math.abs(created - fullBody.created) < 120, 'created: the event creation');
      }
    };

    it('a test fire of every type: thin bodies hold to their schemas and match the full one', async () => {
      for (const eventType of SUBSCRIBABLE_EVENT_TYPES) {
        const fired = await ctx.api('POST', '/api/v1/webhooks/test', {
          token: tenant.token,
          body: { eventType },
        });
        assert.equal(fired.statusCode, 200, fired.body);
      }
      const count = SUBSCRIBABLE_EVENT_TYPES.length;
      await eventually(() => at('/full').length >= count && at('/thin').length >= count);
      await checkPairs(at('/full'), at('/thin'));
      assert.deepEqual(
        new Set(at('/thin').map((r) => bodyOf(r).type)),
        new Set(SUBSCRIBABLE_EVENT_TYPES),
      );
    });

    it('real changes: thin in push and pull, the full body fetched, the filter on the full event', async () => {
      const before = { full: at('/full').length, thin: at('/thin').length };
      const { booking } = await createBooking(ctx, tenant);
      await ctx.admin('POST', `/admin/v1/bookings/${booking.id}/transition`, {
        to: 'deposit_paid',
      });
      const client = await ctx.api('POST', '/api/v1/clients', {
        token: tenant.token,
        body: { kind: 'individual', displayName: 'Ada Thin', email: 'ada.thin@example.com' },
      });
      assert.equal(client.statusCode, 201, client.body);
      const fullLedger = async () =>
        (
          await ctx.api('GET', `/api/v1/webhooks/${full.id}/events?limit=100`, {
            token: tenant.token,
          })
        ).json().data as Array<Body & { sequence: number }>;
      const last = (await fullLedger()).length;
      await eventually(
        () => at('/full').length - before.full >= last && at('/thin').length - before.thin >= last,
      );
      await checkPairs(at('/full').slice(before.full), at('/thin').slice(before.thin));
      const thinBodies = at('/thin').slice(before.thin).map(bodyOf);
      assert.ok(thinBodies.some((b) => b.type === 'booking.created'));
      assert.ok(!at('/thin').some((r) => r.body.includes('ada.thin@example.com')));
      assert.ok(!at('/thin').some((r) => r.body.includes('Ada Lovelace')));

      // The pull API gives what push sent: thin for the thin subscription, same sequences.
      const pulled = (
        await ctx.api('GET', `/api/v1/webhooks/${thin.id}/events?limit=100`, {
          token: tenant.token,
        })
      ).json().data as Array<Body & { sequence: number }>;
      const fullPulled = await fullLedger();
      assert.equal(pulled.length, fullPulled.length);
      for (const [i, item] of pulled.entries()) {
        assert.equal(item.id, fullPulled[i].id);
        assert.deepEqual(item.data, expectedThin(fullPulled[i].data));
      }
    });

    it('GET /events/{id}: the resource read scope, 404 across tenants and for unknown ids', async () => {
      const client = await ctx.api('POST', '/api/v1/clients', {
        token: tenant.token,
        body: { kind: 'company', displayName: 'Scoped Ltd' },
      });
      const pulled = (
        await ctx.api('GET', `/api/v1/webhooks/${full.id}/events?type=client.created&limit=100`, {
          token: tenant.token,
        })
      ).json().data as Body[];
      const event = pulled.find((e) => (e.data.object as Row).id === client.json().data.id) as Body;
      const bookings = await mintToken(ctx, tenant.id, ['bookings:read']);
      const clients = await mintToken(ctx, tenant.id, ['clients:read']);
      const refused = await eventBody(event.id, bookings.token);
      assert.equal(refused.statusCode, 403, refused.body);
      assert.equal(refused.json().required_scope, 'clients:read');
      assert.equal((await eventBody(event.id, clients.token)).statusCode, 200);
      assert.equal((await eventBody(event.id, other.token)).statusCode, 404);
      assert.equal((await eventBody('00000000-0000-4000-8000-000000000000')).statusCode, 404);
      assert.equal((await eventBody('not-an-id')).statusCode, 404);
    });

    it('PATCH payload applies from the next attempt: a redelivery goes thin, signed as sent', async () => {
      const sub = await createSubscription(ctx, tenant, receiver.url('/switch'), {
        events: ['client.created'],
      });
      const id = sub.data.id as string;
      await ctx.api('POST', '/api/v1/clients', {
        token: tenant.token,
        body: { kind: 'individual', displayName: 'Switch Person', phone: '+43 660 1234567' },
      });
      await eventually(() => at('/switch').length === 1);
      assert.ok(at('/switch')[0].body.includes('Switch Person'));
      const patched = await ctx.api('PATCH', `/api/v1/webhooks/${id}`, {
        token: tenant.token,
        body: { payload: 'thin' },
      });
      assert.equal(patched.statusCode, 200, patched.body);
      assert.equal(patched.json().data.payload, 'thin');
      const refusedForm = await ctx.api('PATCH', `/api/v1/webhooks/${id}`, {
        token: tenant.token,
        body: { payload: 'ids' },
      });
      assert.equal(refusedForm.statusCode, 422);
      const deliveries = (
        await ctx.api('GET', `/api/v1/webhooks/${id}/deliveries`, { token: tenant.token })
      ).json().data as Row[];
      const again = await ctx.api(
        'POST',
        `/api/v1/webhooks/${id}/deliveries/${deliveries[0].id}/redeliver`,
        { token: tenant.token },
      );
      assert.equal(again.statusCode, 202, again.body);
      await eventually(() => at('/switch').length === 2);
      const redelivered = at('/switch')[1];
      const event = verifyWebhook<ThinWebhookEvent>(
        redelivered.body,
        redelivered.headers as Record<string, string>,
        sub.signingKey,
      );
      assert.ok(isThinEvent(event));
      assert.equal(event.id, bodyOf(at('/switch')[0]).id);
      assert.ok(!redelivered.body.includes('Switch Person'));
      assert.ok(!redelivered.body.includes('1234567'));
    });
  });
}

describe('docs/personal-data.md', () => {
  it("shows each type's thin data as the code renders it", () => {
    const page = readFileSync('docs/personal-data.md', 'utf8');
    const section = /<!-- thin-payloads:[^\n]*-->\n([\s\S]*?)\n<!-- end thin-payloads -->/.exec(
      page,
    );
    assert.ok(section, 'the page has its rendered section');
    assert.equal(section[1], thinPayloadTable(SUBSCRIBABLE_EVENT_TYPES));
  });
});
