import { FastifyOtelInstrumentation } from '@fastify/otel';
import { trace } from '@opentelemetry/api';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { NodeSDK } from '@opentelemetry/sdk-node';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { ATTR, tracing } from './lib/tracing.ts';

/** Health checks and scrapes: every few seconds, and nothing to follow. */
const PROBES = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * The OpenTelemetry Node SDK, configured by the standard `OTEL_*` variables (exporter protocol,
 * endpoint, headers, sampler, resource), traces only. Loaded only when tracing is on (see
 * src/tracing-start.ts); the application itself uses the API alone (src/lib/tracing.ts).
 *
 * Spans: the HTTP server span of each request (http instrumentation, named by the route template
 * that @fastify/otel reports, with the request id), @fastify/otel's request span, PostgreSQL
 * statements (pg instrumentation; only inside traced work), SQLite statements
 * (src/db/database.ts), an event's producer span and each delivery attempt's consumer and client
 * spans (src/services/events-service.ts, src/delivery/attempt.ts).
 */
export function startTracing(options: { spanProcessors?: SpanProcessor[] } = {}): NodeSDK {
  const env = process.env;
  env.OTEL_SERVICE_NAME ??= 'tourops';
  // Traces only: no metrics or logs pipeline unless asked for by name.
  env.OTEL_METRICS_EXPORTER ??= 'none';
  env.OTEL_LOGS_EXPORTER ??= 'none';
  const sdk = new NodeSDK({
    ...(options.spanProcessors ? { spanProcessors: options.spanProcessors } : {}),
    instrumentations: [
      new HttpInstrumentation({
        // The webhook sender is undici, traced by the worker itself; outgoing `http` is only
        // the exporter's own.
        ignoreOutgoingRequestHook: () => true,
        ignoreIncomingRequestHook: (request) => PROBES.has((request.url ?? '').split('?')[0]),
      }),
      new FastifyOtelInstrumentation({
        registerOnInitialization: true,
        // The request span says enough: a span per hook, or for the handler, is noise (and cost)
        // on every request.
        instrumentHooks: false,
        instrumentHandler: false,
        ignorePaths: (route) => PROBES.has(route.url),
        requestHook: (span, request) => {
          span.updateName(`${request.method} ${request.routeOptions.url ?? 'unmatched'}`);
          span.setAttribute(ATTR.requestId, request.id);
          // The HTTP server span, when the http instrumentation made one, is still the active one.
          trace.getActiveSpan()?.setAttribute(ATTR.requestId, request.id);
        },
      }),
      new PgInstrumentation({ requireParentSpan: true }),
    ],
  });
  sdk.start();
  tracing.on = true;
  tracing.flush = () => sdk.shutdown();
  // A command that ends by itself (no signal) exports what it buffered on the way out.
  process.once('beforeExit', () => void sdk.shutdown().catch(() => undefined));
  return sdk;
}
