import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SpanKind } from '@opentelemetry/api';
import {
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { startWorker } from '../src/start-worker.ts';
import { startTracing } from '../src/tracing-sdk.ts';
import { BACKENDS, createWebhookTestContext, type TestContext } from './helpers/context.ts';
import { createTenant, type TenantFixture } from './helpers/fixtures.ts';
import { HttpsReceiver } from './helpers/https-receiver.ts';
import { until } from './helpers/until.ts';

// Traces in this process, through an in-memory exporter: the request's server span continues the
// caller's trace, the event's producer span sits in it, and each delivery attempt is a trace of its
// own linked to that producer span, whose client span's context the receiver gets only when the
// subscription asks. (The real processes, OTLP over HTTP: tracing-processes.test.ts.)

const exporter = new InMemorySpanExporter();
const sdk = startTracing({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
after(() => sdk.shutdown());

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER = '00f067aa0ba902b7';

const spans = () => exporter.getFinishedSpans();
const inTrace = (traceId: string) => spans().filter((s) => s.spanContext().traceId === traceId);

for (const backend of BACKENDS) {
  describe(`traces from request to receiver (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let receiver: HttpsReceiver;
    let worker: ReturnType<typeof startWorker>;
    const failFirst = new Set<string>();

    before(async () => {
      ctx = await createWebhookTestContext(backend, { WEBHOOK_RETRY_SCHEDULE: '20ms' });
      tenant = await createTenant(ctx);
      receiver = await HttpsReceiver.start({
        responder: (request) => {
          if (failFirst.delete(request.path.split('?')[0])) return { status: 503 };
          return { status: 204 };
        },
      });
      worker = startWorker(ctx.runtime, { pollIntervalMs: 20 });
    });
    after(async () => {
      await worker.stop();
      await receiver.close();
      await ctx.close();
    });

    /** Subscribes `path` to client.created; a client created with `traceparent` then. */
    async function deliverOne(path: string, propagate: boolean, traceId: string) {
      const created = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: {
          url: receiver.url(`${path}?secret=query`),
          events: ['client.created'],
          propagateTraceContext: propagate,
        },
      });
      assert.equal(created.statusCode, 201, created.body);
      assert.equal(created.json().data.propagateTraceContext, propagate);
      const response = await ctx.api('POST', '/api/v1/clients', {
        token: tenant.token,
        body: { kind: 'individual', displayName: 'Traced' },
        headers: {
          traceparent: `00-${traceId}-${CALLER}-01`,
          baggage: 'user=ana,secret=never-forwarded',
        },
      });
      assert.equal(response.statusCode, 201);
      const delivered = await until(
        () => receiver.requests.find((r) => r.path.split('?')[0] === path && r.method === 'POST'),
        'the delivery',
      );
      return { response, delivered, subscriptionId: created.json().data.id as string };
    }

    it('continues the caller trace in the server span, with the event producer span in it', async () => {
      const traceId = `${TRACE.slice(0, 30)}0${backend === 'sqlite' ? 1 : 2}`;
      const { response } = await deliverOne('/plain', false, traceId);
      const mine = inTrace(traceId);
      const server = mine.find((s) => s.kind === SpanKind.SERVER);
      assert.ok(server, 'a server span in the caller trace');
      assert.equal(server.name, 'POST /api/v1/clients');
      assert.equal(server.parentSpanContext?.spanId, CALLER);
      assert.equal(server.attributes['tourops.request_id'], response.headers['service-request-id']);
      assert.equal(server.attributes['http.route'], '/api/v1/clients');
      const producer = mine.find((s) => s.kind === SpanKind.PRODUCER);
      assert.equal(producer?.name, 'create client.created');
      assert.equal(producer?.attributes['messaging.destination.name'], 'client.created');
      if (backend === 'sqlite') {
        // One span per statement of the request (PostgreSQL's come from the pg instrumentation,
        // which patches pg as it loads: see tracing-processes.test.ts).
        const statements = mine.filter((s) => s.attributes['db.system.name'] === 'sqlite');
        assert.ok(
          statements.some((s) => s.name === 'INSERT'),
          'statement spans',
        );
      }
    });

    it('makes each attempt a consumer span of its own trace, linked to the producer span', async () => {
      const traceId = `${TRACE.slice(0, 30)}1${backend === 'sqlite' ? 1 : 2}`;
      failFirst.add('/retried');
      const { delivered, subscriptionId } = await deliverOne('/retried', false, traceId);
      // No trace context unless the subscription asks; never baggage.
      assert.equal(delivered.headers.traceparent, undefined);
      assert.equal(delivered.headers.baggage, undefined);
      const producer = inTrace(traceId).find((s) => s.kind === SpanKind.PRODUCER) as ReadableSpan;
      const eventId = producer.attributes['messaging.message.id'];
      const attempts = await until(() => {
        const found = spans().filter(
          (s) =>
            s.kind === SpanKind.CONSUMER &&
            s.attributes['messaging.message.id'] === eventId &&
            s.attributes['tourops.subscription.id'] === subscriptionId,
        );
        return found.length === 2 ? found : undefined;
      });
      for (const attempt of attempts) {
        assert.equal(attempt.name, 'process client.created');
        assert.notEqual(attempt.spanContext().traceId, traceId, 'a trace of its own');
        assert.equal(attempt.parentSpanContext, undefined);
        assert.deepEqual(
          attempt.links.map((l) => [l.context.traceId, l.context.spanId]),
          [[traceId, producer.spanContext().spanId]],
        );
      }
      const clients = attempts
        .map((attempt) =>
          spans().find(
            (s) =>
              s.kind === SpanKind.CLIENT &&
              s.parentSpanContext?.spanId === attempt.spanContext().spanId,
          ),
        )
        .sort((a, b) => Number(a?.startTime[1]) - Number(b?.startTime[1]));
      const statuses = clients.map((c) => c?.attributes['http.response.status_code']).sort();
      assert.deepEqual(statuses, [204, 503]);
      for (const client of clients) {
        assert.equal(client?.name, 'POST');
        assert.equal(client?.attributes['url.full'], receiver.url('/retried'));
      }
      const resent = clients.map((c) => c?.attributes['http.request.resend_count']);
      assert.deepEqual(resent.sort(), [1, undefined]);
      const failed = clients.find((c) => c?.attributes['http.response.status_code'] === 503);
      assert.equal(failed?.attributes['error.type'], '503');
    });

    it("sends the attempt's client span context when the subscription asks, never baggage", async () => {
      const traceId = `${TRACE.slice(0, 30)}2${backend === 'sqlite' ? 1 : 2}`;
      const { delivered } = await deliverOne('/propagated', true, traceId);
      assert.equal(delivered.headers.baggage, undefined);
      const traceparent = String(delivered.headers.traceparent);
      const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(traceparent);
      assert.ok(match, `a traceparent: ${traceparent}`);
      const client = await until(() =>
        spans().find((s) => s.kind === SpanKind.CLIENT && s.spanContext().spanId === match[2]),
      );
      assert.equal(client.name, 'POST');
      assert.equal(client.spanContext().traceId, match[1]);
      assert.notEqual(match[1], traceId);
    });

    it('PATCH turns propagation on and off; the member is validated', async () => {
      const created = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: receiver.url('/patched'), events: ['client.created'] },
      });
      const id = created.json().data.id;
      assert.equal(created.json().data.propagateTraceContext, false);
      const on = await ctx.api('PATCH', `/api/v1/webhooks/${id}`, {
        token: tenant.token,
        body: { propagateTraceContext: true },
      });
      assert.equal(on.json().data.propagateTraceContext, true);
      const bad = await ctx.api('PATCH', `/api/v1/webhooks/${id}`, {
        token: tenant.token,
        body: { propagateTraceContext: 'yes' },
      });
      assert.equal(bad.statusCode, 422);
      assert.deepEqual(Object.keys(bad.json().errors), ['propagateTraceContext']);
    });

    it('puts no receiver secret or access token in any span', async () => {
      const secrets = ['k-span-4d1c77e2', 'pw-span-90ab13', 'cs-span-5e6f2a71', 'at-span-c0ffee42'];
      const tokenServer = await HttpsReceiver.start({
        responder: () => ({
          status: 200,
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ access_token: secrets[3], token_type: 'Bearer', expires_in: 60 }),
        }),
      });
      try {
        const ids: string[] = [];
        for (const [path, extra] of [
          [
            '/span-basic',
            {
              headers: { 'X-Api-Key': secrets[0] },
              auth: { type: 'basic', username: 'ops', password: secrets[1] },
            },
          ],
          [
            '/span-oauth',
            {
              auth: {
                type: 'oauth2_client_credentials',
                tokenUrl: tokenServer.url('/token'),
                clientId: 'c',
                clientSecret: secrets[2],
              },
            },
          ],
        ] as const) {
          const created = await ctx.api('POST', '/api/v1/webhooks', {
            token: tenant.token,
            body: {
              url: receiver.url(path),
              events: ['client.created'],
              propagateTraceContext: true,
              ...extra,
            },
          });
          assert.equal(created.statusCode, 201, created.body);
          ids.push(created.json().data.id);
        }
        await ctx.api('POST', '/api/v1/clients', {
          token: tenant.token,
          body: { kind: 'individual', displayName: 'Span secrets' },
        });
        // Each attempt's consumer span, ended: its whole tree was exported by then.
        for (const id of ids) {
          await until(
            () =>
              spans().find(
                (span) =>
                  span.kind === SpanKind.CONSUMER &&
                  span.attributes['tourops.subscription.id'] === id,
              ),
            `the attempt span of ${id}`,
          );
        }
        assert.equal(receiver.requests.filter((r) => r.path.startsWith('/span-')).length, 2);
        const exported = JSON.stringify(
          spans().map((s) => ({
            name: s.name,
            attributes: s.attributes,
            events: s.events,
            links: s.links,
          })),
        );
        // The search sees what spans carry (the subscription ids), and no secret among it.
        for (const id of ids) assert.ok(exported.includes(id));
        for (const secret of secrets) assert.equal(exported.includes(secret), false, secret);
        assert.equal(exported.includes(Buffer.from(`ops:${secrets[1]}`).toString('base64')), false);
      } finally {
        await tokenServer.close();
      }
    });
  });
}
