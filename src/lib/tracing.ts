import {
  type Context,
  isSpanContextValid,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
} from '@opentelemetry/api';

/**
 * The application's side of tracing: the OpenTelemetry API only. The SDK (src/tracing-sdk.ts)
 * starts only when an OTLP endpoint is configured and then sets `tracing.on`; until then every
 * call site skips its spans, so tracing costs nothing when it is off. `flush` exports what is
 * still buffered (a stopping process awaits it).
 */
export const tracing = { on: false, flush: async (): Promise<void> => {} };

/** Our spans' tracer; a no-op until the SDK registers a provider. */
export const tracer = trace.getTracer('tourops');

/** Attributes of our own (no OpenTelemetry convention names them). */
export const ATTR = {
  requestId: 'tourops.request_id',
  tenantId: 'tourops.tenant.id',
  subscriptionId: 'tourops.subscription.id',
  deliveryId: 'tourops.delivery.id',
} as const;

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A span's context as a W3C `traceparent` (version 00), or null for a non-recording one. */
export function traceparentOf(span: Span): string | null {
  const context = span.spanContext();
  if (!isSpanContextValid(context)) return null;
  const flags = (context.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED ? '01' : '00';
  return `00-${context.traceId}-${context.spanId}-${flags}`;
}

/** A stored `traceparent` as a span context to link to; null when absent or malformed. */
export function spanContextOf(traceparent: string | null): SpanContext | null {
  const match = traceparent === null ? null : TRACEPARENT.exec(traceparent);
  if (!match) return null;
  const context: SpanContext = {
    traceId: match[1],
    spanId: match[2],
    traceFlags: Number.parseInt(match[3], 16) & TraceFlags.SAMPLED,
    isRemote: true,
  };
  return isSpanContextValid(context) ? context : null;
}

/** The trace and span ids of the active span, for log lines; none outside a span. */
export function activeIds(active?: Context): { traceId: string; spanId: string } | null {
  const span = active === undefined ? trace.getActiveSpan() : trace.getSpan(active);
  if (span === undefined) return null;
  const context = span.spanContext();
  return isSpanContextValid(context) ? { traceId: context.traceId, spanId: context.spanId } : null;
}

/**
 * Runs one database statement in a client span, when it runs inside a traced request or attempt
 * (a statement of no traced work, the worker's polling say, gets none). For the embedded database:
 * PostgreSQL's statements are traced by the pg instrumentation.
 */
export function statementSpan<T>(sql: string, run: () => T): T {
  if (trace.getActiveSpan() === undefined) return run();
  const operation = /^\s*(\w+)/.exec(sql)?.[1]?.toUpperCase() ?? 'SQL';
  const span = tracer.startSpan(operation, {
    kind: SpanKind.CLIENT,
    attributes: {
      'db.system.name': 'sqlite',
      'db.operation.name': operation,
      'db.query.text': sql,
    },
  });
  try {
    return run();
  } catch (error) {
    span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
    throw error;
  } finally {
    span.end();
  }
}
