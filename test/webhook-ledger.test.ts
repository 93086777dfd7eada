import assert from 'node:assert/strict';
import { createPublicKey, randomBytes, randomUUID, verify } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { Webhook } from 'standardwebhooks';
import Stripe from 'stripe';
import { verifyWebhook } from '../sdk/src/index.ts';
import { RetentionService } from '../src/services/retention-service.ts';
import { startWorker } from '../src/start-worker.ts';
import { BACKENDS, createWebhookTestContext, type TestContext } from './helpers/context.ts';
import { createSubscription, createTenant, type TenantFixture } from './helpers/fixtures.ts';
import {
  HttpsReceiver,
  type ReceivedRequest,
  standardWebhookHeaders,
} from './helpers/https-receiver.ts';
import { eventually } from './helpers/until.ts';

const stripe = new Stripe('sk_test_x');
const DAY = 86_400_000;

interface PushedBody {
  id: string;
  type: string;
  created: number;
  sequence?: number;
  data: Record<string, unknown>;
}

interface LedgerItem {
  id: string;
  type: string;
  created: number;
  data: Record<string, unknown>;
  sequence: number;
  deliveryStatus: string;
  deliveryId: string;
}

const header = (request: ReceivedRequest, name: string) => String(request.headers[name]);

for (const backend of BACKENDS) {
  describe(`subscription ledger: sequence, pull API, Standard Webhooks, PATCH (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let other: TenantFixture;
    let receiver: HttpsReceiver;
    let worker: ReturnType<typeof startWorker>;
    /** Paths whose requests the receiver answers 500 (the endpoint is down). */
    const down = new Set<string>();

    before(async () => {
      ctx = await createWebhookTestContext(backend, { WEBHOOK_RETRY_SCHEDULE: '20ms' });
      tenant = await createTenant(ctx, { tier: 'pro' });
      other = await createTenant(ctx, { tier: 'pro' });
      receiver = await HttpsReceiver.start({
        responder: (request) => ({ status: down.has(request.path) ? 500 : 204 }),
      });
      worker = startWorker(ctx.runtime, { pollIntervalMs: 20 });
    });
    after(async () => {
      await worker.stop();
      await receiver.close();
      await ctx.close();
    });

    const subscribe = (path: string, extra: Record<string, unknown> = {}) =>
      createSubscription(ctx, tenant, receiver.url(path), extra);
    const createClient = (name: string, key?: string) =>
      ctx.api('POST', '/api/v1/clients', {
        token: tenant.token,
        body: { kind: 'individual', displayName: name },
        headers: key ? { 'idempotency-key': key } : {},
      });
    const pushedTo = (path: string) => receiver.requests.filter((r) => r.path === path);
    const pull = (id: string, query: string, token = tenant.token) =>
      ctx.api('GET', `/api/v1/webhooks/${id}/events?${query}`, { token });
    const pullAll = async (id: string, after = 0) => {
      const items: LedgerItem[] = [];
      for (let cursor = after; ; ) {
        const page = await pull(id, `after=${cursor}&limit=100`);
        assert.equal(page.statusCode, 200, page.body);
        const { data, meta } = page.json() as { data: LedgerItem[]; meta: { hasMore: boolean } };
        items.push(...data);
        if (!meta.hasMore) return items;
        cursor = data[data.length - 1].sequence;
      }
    };
    const patch = (id: string, body: unknown, token = tenant.token, key?: string) =>
      ctx.api('PATCH', `/api/v1/webhooks/${id}`, {
        token,
        body,
        headers: key ? { 'idempotency-key': key } : {},
      });

    it('numbers 250 events from 32 parallel writers 1..250, in push and in pull alike', async () => {
      const { data } = await subscribe('/ledger');
      const total = 250;
      let next = 0;
      await Promise.all(
        Array.from({ length: 32 }, async (_, writer) => {
          for (let n = next++; n < total; n = next++) {
            // Half of the writers key their requests.
            const answer = await createClient(
              `Client ${n}`,
              writer % 2 === 0 ? randomUUID() : undefined,
            );
            assert.equal(answer.statusCode, 201, answer.body);
          }
        }),
      );
      await eventually(() => pushedTo('/ledger').length >= total);
      const pushed = pushedTo('/ledger');
      assert.equal(pushed.length, total);
      const bodies = pushed.map((request) => {
        const body = JSON.parse(request.body) as PushedBody;
        assert.equal(header(request, 'service-event-sequence'), String(body.sequence));
        return body;
      });
      const sequences = bodies.map((body) => body.sequence as number).sort((a, b) => a - b);
      assert.deepEqual(
        sequences,
        Array.from({ length: total }, (_, i) => i + 1),
      );

      // Received is not yet recorded: wait for the outcomes.
      await eventually(async () =>
        (await pullAll(data.id)).every((item) => item.deliveryStatus === 'success'),
      );
      const pulled = await pullAll(data.id);
      assert.deepEqual(
        pulled.map((item) => item.sequence),
        Array.from({ length: total }, (_, i) => i + 1),
      );
      const bySequence = new Map(bodies.map((body) => [body.sequence, body]));
      for (const item of pulled) {
        const body = bySequence.get(item.sequence) as PushedBody;
        assert.deepEqual(
          { id: item.id, type: item.type, data: item.data, sequence: item.sequence },
          { id: body.id, type: body.type, data: body.data, sequence: body.sequence },
        );
        assert.equal(item.deliveryStatus, 'success');
      }
    });

    it('gives a receiver that was down exactly what it missed, dead letters included', async () => {
      const { data } = await subscribe('/down-for-a-while');
      for (const name of ['a', 'b', 'c']) await createClient(name);
      await eventually(() => pushedTo('/down-for-a-while').length >= 3);
      // The receiver processed 1..3, then went down: four events are dead-lettered.
      down.add('/down-for-a-while');
      const missed: string[] = [];
      for (const name of ['d', 'e', 'f', 'g']) {
        const created = await createClient(name);
        missed.push(created.json().data.id);
      }
      await eventually(async () => {
        const items = await pullAll(data.id, 3);
        return items.length === 4 && items.every((item) => item.deliveryStatus === 'dead_letter');
      });
      down.delete('/down-for-a-while');

      const items = await pullAll(data.id, 3);
      assert.deepEqual(
        items.map((item) => item.sequence),
        [4, 5, 6, 7],
      );
      assert.deepEqual(
        items.map((item) => item.data.clientId),
        missed,
      );
      // The filters see the same events.
      const dead = await pull(data.id, 'after=0&deliveryStatus=dead_letter');
      assert.deepEqual(
        dead.json().data.map((item: LedgerItem) => item.sequence),
        [4, 5, 6, 7],
      );
      const typed = await pull(data.id, 'after=5&type=client.created&limit=1');
      assert.deepEqual(typed.json(), { data: [items[2]], meta: { hasMore: true } });
      const none = await pull(data.id, 'type=booking.confirmed');
      assert.deepEqual(none.json(), { data: [], meta: { hasMore: false } });

      // A redelivery keeps its original's sequence, and the ledger shows it as the latest.
      const redelivered = await ctx.api(
        'POST',
        `/api/v1/webhooks/${data.id}/deliveries/${items[0].deliveryId}/redeliver`,
        { token: tenant.token },
      );
      assert.equal(redelivered.statusCode, 202, redelivered.body);
      const redeliveryId = redelivered.json().data.deliveryId;
      await eventually(async () => {
        const [first] = (await pull(data.id, 'after=3&limit=1')).json().data as LedgerItem[];
        return first.deliveryId === redeliveryId && first.deliveryStatus === 'success';
      });
      const resent = pushedTo('/down-for-a-while').at(-1) as ReceivedRequest;
      assert.equal(header(resent, 'service-event-sequence'), '4');
      assert.equal((JSON.parse(resent.body) as PushedBody).sequence, 4);

      // A test fire takes no sequence and carries none.
      const fired = await ctx.api('POST', '/api/v1/webhooks/test', {
        token: tenant.token,
        body: { subscriptionId: data.id },
      });
      assert.equal(fired.statusCode, 200, fired.body);
      await eventually(() =>
        pushedTo('/down-for-a-while').some((r) => r.body.includes(fired.json().data.eventId)),
      );
      const test = pushedTo('/down-for-a-while').find((r) =>
        r.body.includes(fired.json().data.eventId),
      ) as ReceivedRequest;
      assert.equal(test.headers['service-event-sequence'], undefined);
      assert.equal('sequence' in JSON.parse(test.body), false);
      await createClient('h');
      const after = await pullAll(data.id, 7);
      assert.deepEqual(
        after.map((item) => item.sequence),
        [8],
      );
    });

    it('answers 409 events_expired past retention, at the start and at a hole, never a skip', async () => {
      const { data } = await subscribe('/expiring');
      for (const name of ['a', 'b', 'c']) await createClient(name);
      await eventually(async () => {
        const items = await pullAll(data.id);
        return items.length === 3 && items.every((item) => item.deliveryStatus === 'success');
      });
      // 31 days later, with 30 days of retention, the three are purged.
      const retention = new RetentionService({
        retention: ctx.runtime.repositories.retention,
        clock: { now: () => new Date(Date.now() + 31 * DAY) },
        days: 30,
      });
      await retention.purge({ pauseFactor: 0 });
      const empty = await pull(data.id, 'after=0');
      assert.equal(empty.statusCode, 409, empty.body);
      assert.match(String(empty.headers['content-type']), /^application\/problem\+json/);
      assert.equal(empty.json().code, 'events_expired');
      assert.equal(empty.json().firstSequence, 4);

      // Three more, then the middle one removed (as retention can, below a delivery it keeps).
      for (const name of ['d', 'e', 'f']) await createClient(name);
      await eventually(async () => {
        const items = await pullAll(data.id, 3);
        return items.length === 3 && items.every((item) => item.deliveryStatus === 'success');
      });
      await sql`delete from webhook_deliveries where subscription_id = ${data.id} and sequence = 5`.execute(
        ctx.runtime.database.db,
      );
      // Paused subscriptions are pulled too (the point of pulling).
      assert.equal((await patch(data.id, { active: false })).statusCode, 200);
      const expired = await pull(data.id, 'after=2');
      assert.equal(expired.statusCode, 409);
      assert.equal(expired.json().firstSequence, 4);
      // The page stops before the hole ...
      const page = await pull(data.id, 'after=3');
      assert.equal(page.statusCode, 200, page.body);
      assert.deepEqual(
        page.json().data.map((item: LedgerItem) => item.sequence),
        [4],
      );
      assert.equal(page.json().meta.hasMore, true);
      // ... and the next one says what is gone.
      const hole = await pull(data.id, 'after=4');
      assert.equal(hole.statusCode, 409);
      assert.deepEqual(
        { code: hole.json().code, firstSequence: hole.json().firstSequence },
        { code: 'events_expired', firstSequence: 6 },
      );
      // Filtered, too: the page ends before the hole, and the next one meets it first.
      const filtered = await pull(data.id, 'after=3&deliveryStatus=success');
      assert.deepEqual(
        filtered.json().data.map((item: LedgerItem) => item.sequence),
        [4],
      );
      assert.equal(filtered.json().meta.hasMore, true);
      const filteredHole = await pull(data.id, 'after=4&type=client.created');
      assert.equal(filteredHole.statusCode, 409);
      assert.equal(filteredHole.json().firstSequence, 6);
      // Nothing of a type after the hole: still not a silent skip.
      const noneAfter = await pull(data.id, 'after=4&type=booking.confirmed');
      assert.equal(noneAfter.statusCode, 409);
      assert.deepEqual(
        (await pullAll(data.id, 5)).map((item) => item.sequence),
        [6],
      );

      // A deleted subscription's ledger stays readable.
      const deleted = await ctx.api('DELETE', `/api/v1/webhooks/${data.id}`, {
        token: tenant.token,
      });
      assert.equal(deleted.statusCode, 204);
      assert.equal((await pull(data.id, 'after=5')).statusCode, 200);
    });

    it("answers 404 for another tenant's subscription, and 422 for a bad query", async () => {
      const { data } = await subscribe('/private');
      assert.equal((await pull(data.id, 'after=0', other.token)).statusCode, 404);
      assert.equal((await patch(data.id, { active: false }, other.token)).statusCode, 404);
      assert.equal((await pull('whs_unknown', 'after=0')).statusCode, 404);
      for (const query of ['after=-1', 'limit=0', 'limit=101', 'type=nope', 'cursor=x']) {
        const answer = await pull(data.id, query);
        assert.equal(answer.statusCode, 422, `${query}: ${answer.body}`);
      }
    });

    it('signs for Standard Webhooks and Stripe with one key string, through a rotation', async () => {
      const { data, signingKey: first } = await subscribe('/standard', { standardWebhooks: true });
      assert.match(first, /^whsec_[A-Za-z0-9]{44}$/);
      const listed = (await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token }))
        .json()
        .data.find((sub: { id: string }) => sub.id === data.id);
      assert.equal(listed.standardWebhooks, true);
      await createClient('signed');
      await eventually(() => pushedTo('/standard').length >= 1);
      const verifyWith = (request: ReceivedRequest, key: string) => {
        const event = new Webhook(key).verify(
          request.body,
          standardWebhookHeaders(request),
        ) as PushedBody;
        const stripeEvent = stripe.webhooks.constructEvent(
          request.body,
          header(request, 'service-signature'),
          key,
        );
        assert.equal(stripeEvent.id, event.id);
        assert.equal(header(request, 'webhook-id'), event.id);
      };
      verifyWith(pushedTo('/standard')[0], first);

      const rotated = await ctx.api('POST', `/api/v1/webhooks/${data.id}/rotate-key`, {
        token: tenant.token,
      });
      const second = rotated.json().signingKey as string;
      await createClient('rotated');
      await eventually(() => pushedTo('/standard').length >= 2);
      const during = pushedTo('/standard')[1];
      assert.equal(header(during, 'webhook-signature').split(' ').length, 2);
      verifyWith(during, second);
      verifyWith(during, first);
      assert.throws(() =>
        new Webhook(`whsec_${randomBytes(33).toString('base64')}`).verify(
          during.body,
          standardWebhookHeaders(during),
        ),
      );

      // Without the option: no Standard Webhooks headers.
      assert.equal((await patch(data.id, { standardWebhooks: false })).statusCode, 200);
      await createClient('plain');
      await eventually(() => pushedTo('/standard').length >= 3);
      assert.equal(pushedTo('/standard')[2].headers['webhook-signature'], undefined);
    });

    it('signs v1a with Ed25519: the public key verifies, by Node crypto and the SDK, both keys after a rotation', async () => {
      const refused = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: {
          url: receiver.url('/v1a-refused'),
          events: ['client.created'],
          asymmetricSignatures: true,
        },
      });
      assert.equal(refused.statusCode, 422);
      assert.deepEqual(Object.keys(refused.json().errors), ['asymmetricSignatures']);

      const { data, signingKey } = await subscribe('/v1a', {
        standardWebhooks: true,
        asymmetricSignatures: true,
      });
      const shown = (await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token }))
        .json()
        .data.find((sub: { id: string }) => sub.id === data.id);
      assert.equal(shown.asymmetricSignatures, true);
      const firstPublic = shown.publicKey as string;
      assert.match(firstPublic, /^whpk_[A-Za-z0-9+/]{43}=$/);
      // The secret half is stored sealed and shown nowhere.
      const stored = await ctx.runtime.database.db
        .selectFrom('webhookSubscriptions')
        .select('signingKeyPair')
        .where('id', '=', data.id)
        .executeTakeFirstOrThrow();
      assert.ok(stored.signingKeyPair && !stored.signingKeyPair.includes('whsk_'));
      assert.ok(!JSON.stringify(shown).includes('whsk_'));

      /** Node's own crypto, from the raw public key: what a receiver without our SDK does. */
      const nodeVerifies = (request: ReceivedRequest, publicKey: string) => {
        const raw = Buffer.from(publicKey.slice('whpk_'.length), 'base64');
        const key = createPublicKey({
          key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') },
          format: 'jwk',
        });
        const signed = Buffer.from(
          `${header(request, 'webhook-id')}.${header(request, 'webhook-timestamp')}.${request.body}`,
        );
        return header(request, 'webhook-signature')
          .split(' ')
          .filter((part) => part.startsWith('v1a,'))
          .some((part) => verify(null, signed, key, Buffer.from(part.slice(4), 'base64')));
      };
      await createClient('asymmetric');
      await eventually(() => pushedTo('/v1a').length >= 1);
      const first = pushedTo('/v1a')[0];
      assert.match(header(first, 'webhook-signature'), /^v1,\S+ v1a,\S+$/);
      assert.ok(nodeVerifies(first, firstPublic));
      assert.equal(
        verifyWebhook(first.body, standardWebhookHeaders(first), firstPublic).type,
        'client.created',
      );
      // The symmetric v1 beside it still verifies with the standardwebhooks package.
      assert.equal(
        (new Webhook(signingKey).verify(first.body, standardWebhookHeaders(first)) as PushedBody)
          .type,
        'client.created',
      );
      const tampered = first.body.replace('asymmetric', 'Asymmetric');
      assert.throws(() => verifyWebhook(tampered, standardWebhookHeaders(first), firstPublic));

      const rotated = await ctx.api('POST', `/api/v1/webhooks/${data.id}/rotate-key`, {
        token: tenant.token,
      });
      const secondPublic = rotated.json().data.publicKey as string;
      assert.match(secondPublic, /^whpk_/);
      assert.notEqual(secondPublic, firstPublic);
      await createClient('asymmetric, rotated');
      await eventually(() => pushedTo('/v1a').length >= 2);
      const during = pushedTo('/v1a')[1];
      assert.equal(
        header(during, 'webhook-signature')
          .split(' ')
          .filter((p) => p.startsWith('v1a,')).length,
        2,
      );
      for (const publicKey of [firstPublic, secondPublic]) {
        assert.ok(nodeVerifies(during, publicKey));
        assert.equal(
          verifyWebhook(during.body, standardWebhookHeaders(during), publicKey).type,
          'client.created',
        );
      }
      const stranger = `whpk_${randomBytes(32).toString('base64')}`;
      assert.throws(() => verifyWebhook(during.body, standardWebhookHeaders(during), stranger));

      // Standard Webhooks off while v1a is on: refused; both off together: fine, no key left.
      assert.equal((await patch(data.id, { standardWebhooks: false })).statusCode, 422);
      const off = await patch(data.id, { standardWebhooks: false, asymmetricSignatures: false });
      assert.equal(off.statusCode, 200, off.body);
      assert.equal(off.json().data.publicKey, null);
      // Off drops every pair, the retired one too: on again signs by the new pair alone.
      const on = await patch(data.id, { standardWebhooks: true, asymmetricSignatures: true });
      assert.equal(on.statusCode, 200, on.body);
      const thirdPublic = on.json().data.publicKey as string;
      await createClient('asymmetric, on again');
      await eventually(() => pushedTo('/v1a').length >= 3);
      const again = pushedTo('/v1a')[2];
      const v1a = header(again, 'webhook-signature')
        .split(' ')
        .filter((p) => p.startsWith('v1a,'));
      assert.equal(v1a.length, 1, header(again, 'webhook-signature'));
      assert.ok(nodeVerifies(again, thirdPublic));
      assert.ok(!nodeVerifies(again, firstPublic), 'a pair dropped by turning v1a off signs again');
      assert.ok(!nodeVerifies(again, secondPublic));
    });

    it('asks for a rotation before turning Standard Webhooks on for a key of the older form', async () => {
      const { data } = await subscribe('/older-key');
      // A key as made before (43 base64url characters), sealed as the service seals keys.
      const older = `whsec_${randomBytes(32).toString('base64url')}`;
      await ctx.runtime.repositories.webhooks.updateSubscription(tenant.id, data.id, {
        signingKey: ctx.runtime.services.secrets.encrypt(older, data.id),
      });
      const refused = await patch(data.id, { standardWebhooks: true });
      assert.equal(refused.statusCode, 409, refused.body);
      assert.equal(refused.json().code, 'signing_key_rotation_required');
      const rotated = await ctx.api('POST', `/api/v1/webhooks/${data.id}/rotate-key`, {
        token: tenant.token,
      });
      const current = rotated.json().signingKey as string;
      const accepted = await patch(data.id, { standardWebhooks: true });
      assert.equal(accepted.statusCode, 200, accepted.body);
      await createClient('after rotation');
      await eventually(() => pushedTo('/older-key').length >= 1);
      const request = pushedTo('/older-key')[0];
      // The older key still signs Service-Signature; only the current one can sign the other.
      assert.equal(header(request, 'webhook-signature').split(' ').length, 1);
      stripe.webhooks.constructEvent(request.body, header(request, 'service-signature'), older);
      new Webhook(current).verify(request.body, standardWebhookHeaders(request));
    });

    it('PATCH changes what is given: URL, events, pause and enable; keyed; 404 once deleted', async () => {
      const { data } = await subscribe('/patched');
      const empty = await patch(data.id, {});
      assert.equal(empty.statusCode, 422, empty.body);
      const unknown = await patch(data.id, { secret: 'x' });
      assert.equal(unknown.statusCode, 422, unknown.body);
      const insecure = await patch(data.id, { url: 'http://127.0.0.1/hook' });
      assert.equal(insecure.statusCode, 422, insecure.body);
      assert.ok(insecure.json().errors.url, insecure.body);

      await createClient('before the pause');
      await eventually(() => pushedTo('/patched').length === 1);
      const [original] = (await pull(data.id, 'after=0')).json().data as LedgerItem[];

      // Paused: no new event is fanned out to it, and a pending delivery stays pending.
      const paused = await patch(data.id, { active: false }, tenant.token, 'pause-once');
      assert.equal(paused.statusCode, 200, paused.body);
      assert.equal(paused.json().data.active, false);
      assert.notEqual(paused.json().data.pausedAt, null);
      const replay = await patch(data.id, { active: false }, tenant.token, 'pause-once');
      assert.equal(replay.headers['idempotency-replayed'], 'true');
      assert.equal(replay.body, paused.body);
      await createClient('while paused');
      const row = await ctx.runtime.repositories.webhooks.findDelivery(
        tenant.id,
        data.id,
        original.deliveryId,
      );
      assert.ok(row);
      await ctx.runtime.database.withTransaction(() =>
        ctx.runtime.services.events.requeue(tenant.id, data.id, [row]),
      );
      // A marker: an event to another endpoint, due after the requeued row and claimed by a
      // claim that saw that row due; had the paused endpoint's row been taken, it went first.
      const { data: marker } = await subscribe('/patched-marker');
      await createClient('marker');
      await eventually(() => pushedTo('/patched-marker').length === 1);
      await ctx.api('DELETE', `/api/v1/webhooks/${marker.id}`, { token: tenant.token });
      assert.equal(pushedTo('/patched').length + pushedTo('/moved').length, 1);
      const ledger = (await pull(data.id, 'after=0')).json().data as LedgerItem[];
      assert.deepEqual(
        ledger.map((item) => [item.sequence, item.deliveryStatus]),
        [[1, 'pending']],
      );

      // A new URL and re-enabled: the pending redelivery goes there.
      const moved = await patch(data.id, { url: receiver.url('/moved'), active: true });
      assert.equal(moved.statusCode, 200, moved.body);
      assert.equal(moved.json().data.url, receiver.url('/moved'));
      assert.equal(moved.json().data.active, true);
      assert.equal(moved.json().data.pausedAt, null);
      await eventually(() => pushedTo('/moved').length === 1);
      assert.equal(header(pushedTo('/moved')[0], 'service-event-sequence'), '1');

      const events = await patch(data.id, { events: ['trip.published', 'client.created'] });
      assert.deepEqual(events.json().data.events, ['trip.published', 'client.created']);

      const deleted = await ctx.api('DELETE', `/api/v1/webhooks/${data.id}`, {
        token: tenant.token,
      });
      assert.equal(deleted.statusCode, 204);
      assert.equal((await patch(data.id, { active: true })).statusCode, 404);
    });
  });
}
