import { FastifyOtelInstrumentation } from '@fastify/otel';
import { DiagLogLevel, diag, type Span, trace } from '@opentelemetry/api';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { NodeSDK } from '@opentelemetry/sdk-node';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';
import pino from 'pino';
import { loggedQuery } from './http/pipeline/log-fields.ts';
import { LogThrottle } from './lib/log-throttle.ts';
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
 * spans (src/services/events-service.ts, src/delivery/attempt-spans.ts).
 */
export function startTracing(options: { spanProcessors?: SpanProcessor[] } = {}): NodeSDK {
  const env = process.env;
  env.OTEL_SERVICE_NAME ??= 'tourops';
  // Traces only: no metrics or logs pipeline unless asked for by name.
  env.OTEL_METRICS_EXPORTER ??= 'none';
  env.OTEL_LOGS_EXPORTER ??= 'none';
  reportExporterTrouble(env);
  const sdk = new NodeSDK({
    ...(options.spanProcessors ? { spanProcessors: options.spanProcessors } : {}),
    instrumentations: [
      new HttpInstrumentation({
        // The webhook sender is undici, traced by the worker itself; outgoing `http` is only
        // the exporter's own.
        ignoreOutgoingRequestHook: () => true,
        ignoreIncomingRequestHook: (request) => PROBES.has((request.url ?? '').split('?')[0]),
        // Its query as a request line logs it (a search's text may be a person's name).
        requestHook: (span, request) => {
          if ('url' in request) queryAttributes(span, request.url ?? '');
        },
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
          queryAttributes(span, request.url);
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

/**
 * `url.path` without the query, and `url.query` as a request line logs it (loggedQuery: only the
 * values of the API's own non-text parameters), over what the instrumentations set.
 */
function queryAttributes(span: Span, url: string): void {
  span.setAttribute('url.path', url.split('?')[0]);
  const query = loggedQuery(url);
  if (query !== undefined) span.setAttribute('url.query', query);
}

/** At most one line a minute about failed exports: a collector that is down fails every batch. */
const EXPORT_FAILURE_LOG_INTERVAL_MS = 60_000;

/**
 * The SDK says what goes wrong only through the API's `diag` logger, which is silent unless set:
 * a collector nobody listens on would lose every span without a word. Its warnings and errors go
 * to the log at `warn`; a failed export (the SDK's error handler passes the exception as JSON)
 * names the endpoint and the cause, at most once a minute with the count of those left unsaid.
 */
function reportExporterTrouble(env: NodeJS.ProcessEnv): void {
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  // Its own logger: this runs before the configuration is read (LOG_LEVEL is checked there).
  const level = env.LOG_LEVEL && env.LOG_LEVEL in pino.levels.values ? env.LOG_LEVEL : 'info';
  const logger = pino({ level }).child({ component: 'tracing' });
  const failures = new LogThrottle(EXPORT_FAILURE_LOG_INTERVAL_MS);
  const report = (message: unknown, ...rest: unknown[]) => {
    const cause = exportFailureCause(message);
    if (cause === null) {
      logger.warn({ details: rest.map(String) }, `OpenTelemetry: ${String(message)}`);
      return;
    }
    const said = failures.next();
    if (said === null) return;
    logger.warn(
      { endpoint, cause, failuresUnreported: said.unsaid },
      `span export to ${endpoint} failed (${cause}); spans are being lost`,
    );
  };
  const quiet = () => {};
  diag.setLogger(
    { error: report, warn: report, info: quiet, debug: quiet, verbose: quiet },
    { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
  );
}

/** The cause of a failed export, from the SDK's error handler's JSON of the exception; else null. */
function exportFailureCause(message: unknown): string | null {
  if (typeof message !== 'string' || !message.startsWith('{')) return null;
  try {
    const error = JSON.parse(message) as { message?: unknown; code?: unknown };
    if (typeof error.message !== 'string') return null;
    return typeof error.code === 'string' && !error.message.includes(error.code)
      ? `${error.code}: ${error.message}`
      : error.message;
  } catch {
    return null;
  }
}
