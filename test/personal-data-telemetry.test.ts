import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { SUBSCRIBABLE_EVENT_TYPES } from '../src/domain/states.ts';
import { startWorker } from '../src/start-worker.ts';
import { startTracing } from '../src/tracing-sdk.ts';
import { BACKENDS, createWebhookTestContext } from './helpers/context.ts';
import { createSubscription, createTenant, createTrip } from './helpers/fixtures.ts';
import { HttpsReceiver } from './helpers/https-receiver.ts';
import { captureLogs } from './helpers/log-capture.ts';
import { until } from './helpers/until.ts';

// Nothing personal where it need not be: a client's and a traveller's name, e-mail, phone, VAT id
// and notes reach no log line at any level, no metric and no span, whatever the request does with
// them (stored, announced, refused as invalid, sent to a receiver that echoes them in a failure).
// The stores that do keep them are docs/operations.md's "Personal data".

const exporter = new InMemorySpanExporter();
const sdk = startTracing({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
after(() => sdk.shutdown());

const PERSON = {
  displayName: 'Zebulon Quartermaine',
  legalName: 'Quartermaine Voyages Ltd',
  email: 'zeb.quartermaine@mail.test',
  phone: '+44 7700 900461',
  vatId: 'GB461461461',
  notes: 'Quartermaine prefers the aisle',
};
const TRAVELLER = { travelerName: 'Philippa Quartermaine', travelerEmail: 'pippa.q@mail.test' };
/** What must appear nowhere: each value, or a part of it a log line might cut it to. */
const MARKERS = ['Quartermaine', 'zeb.quartermaine', 'pippa.q', '900461', 'GB461461461'];

for (const backend of BACKENDS) {
  describe(`personal data in logs, metrics and traces (${backend})`, () => {
    it('reaches no log line at trace level, no metric and no span attribute', async () => {
      const { lines, logger } = captureLogs('trace');
      const ctx = await createWebhookTestContext(
        backend,
        { WEBHOOK_RETRY_SCHEDULE: '10ms,10ms' },
        { logger },
      );
      // A receiver that fails every attempt, echoing what it got (the attempt log keeps an excerpt).
      const receiver = await HttpsReceiver.start({
        responder: (request) => ({ status: 500, body: request.body }),
      });
      const worker = startWorker(ctx.runtime, { pollIntervalMs: 20 });
      try {
        const tenant = await createTenant(ctx);
        await createSubscription(ctx, tenant, receiver.url('/echo'), {
          events: [...SUBSCRIBABLE_EVENT_TYPES],
        });
        const created = await ctx.api('POST', '/api/v1/clients', {
          token: tenant.token,
          body: { kind: 'company', ...PERSON },
        });
        assert.equal(created.statusCode, 201, created.body);
        const client = created.json().data;
        // A change announced with both sides (client.updated carries the object).
        await ctx.admin('POST', `/admin/v1/clients/${client.id}/archive`);
        // Refused input is echoed to its caller only.
        for (const body of [
          { kind: 'individual', displayName: PERSON.displayName, email: 'zeb.quartermaine@' },
          { kind: 'individual', displayName: PERSON.displayName, phone: PERSON.phone.repeat(9) },
        ]) {
          const refused = await ctx.api('POST', '/api/v1/clients', { token: tenant.token, body });
          assert.equal(refused.statusCode, 422, refused.body);
        }
        const found = await ctx.api(
          'GET',
          `/api/v1/clients?limit=5&q=${encodeURIComponent(PERSON.displayName)}`,
          { token: tenant.token },
        );
        assert.ok(found.statusCode < 500, found.body);
        const trip = await createTrip(ctx, tenant);
        await ctx.admin('POST', `/admin/v1/trips/${trip.id}/publish`);
        await ctx.admin('POST', '/admin/v1/bookings', {
          tripId: trip.id,
          totalRetailCents: 90_000,
          currency: 'EUR',
          ...TRAVELLER,
        });
        // The booking's body sent, and the client's bodies three times (retries of failures).
        await until(
          () =>
            receiver.requests.some((r) => r.body.includes(TRAVELLER.travelerEmail)) &&
            receiver.requests.filter((r) => r.body.includes(PERSON.email)).length >= 3
              ? true
              : undefined,
          'the personal data sent, and echoed back',
        );
        const metrics = (await ctx.app.inject({ url: '/metrics' })).body;
        assert.match(metrics, /^tourops_webhook_attempts_total\{/m);

        const spans = exporter.getFinishedSpans().map((span) => ({
          name: span.name,
          attributes: span.attributes,
          events: span.events,
          status: span.status,
        }));
        assert.ok(spans.length > 0, 'traces were recorded');
        assert.ok(lines.length > 0, 'lines were logged');
        const shown = { logs: JSON.stringify(lines), metrics, spans: JSON.stringify(spans) };
        for (const [where, text] of Object.entries(shown)) {
          for (const marker of MARKERS) {
            const at = text.indexOf(marker);
            assert.equal(at, -1, `${marker} in the ${where}: …${text.slice(at - 200, at + 100)}…`);
          }
        }
      } finally {
        await worker.stop();
        await receiver.close();
        await ctx.close();
      }
    });
  });
}
