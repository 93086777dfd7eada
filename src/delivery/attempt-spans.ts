import {
  context,
  type Link,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { type BrokerTarget, brokerTarget, destinationKind } from '../domain/destinations.ts';
import { ATTR, spanContextOf, tracer } from '../lib/tracing.ts';
import { INTERNAL_FAILURE, type SendResult } from './http-sender.ts';
import type { ClaimedDelivery } from './types.ts';

/**
 * An attempt in its spans, when tracing is on: `send` runs inside the attempt's consumer span (see
 * processSpan) and is handed the send's span (see sendSpan), begun as the attempt's request is
 * made. Both end with the attempt's outcome; a send that throws ends them as failed on our side.
 */
export function traced(
  delivery: ClaimedDelivery,
  send: (span: Span) => Promise<SendResult>,
): Promise<SendResult> {
  const process = processSpan(delivery);
  return context.with(trace.setSpan(ROOT_CONTEXT, process), async () => {
    const span = sendSpan(delivery);
    let result = INTERNAL_FAILURE;
    try {
      result = await send(span);
      return result;
    } finally {
      ended(span, result);
      ended(process, result);
    }
  });
}

/**
 * An attempt's consumer span: a trace of its own (attempts of one event can span hours), linked to
 * the span that created the event when one was stored with it.
 */
function processSpan(delivery: ClaimedDelivery): Span {
  const producer = spanContextOf(delivery.traceContext);
  const links: Link[] = producer === null ? [] : [{ context: producer }];
  return tracer.startSpan(
    `process ${delivery.eventType}`,
    {
      kind: SpanKind.CONSUMER,
      root: true,
      links,
      attributes: {
        'messaging.system': 'tourops',
        'messaging.operation.type': 'process',
        'messaging.destination.name': delivery.eventType,
        'messaging.message.id': delivery.eventId,
        [ATTR.tenantId]: delivery.tenantId,
        [ATTR.subscriptionId]: delivery.subscriptionId,
        [ATTR.deliveryId]: delivery.id,
      },
    },
    ROOT_CONTEXT,
  );
}

/**
 * The send's span (a child of the active process span): a POST's client span, its URL without
 * the query; or a broker's producer span, naming the exchange or subject (never the password).
 */
function sendSpan(delivery: ClaimedDelivery): Span {
  let url: URL | null = null;
  try {
    url = new URL(delivery.url);
  } catch {
    // The sender refuses it (an attempt of class internal); the span says what was tried.
  }
  if (url !== null && destinationKind(delivery.url) !== 'https') {
    const parsed = brokerTarget(url);
    if (parsed.ok) return producerSpan(delivery, parsed.target);
  }
  const attributes: Record<string, string | number> = { 'http.request.method': 'POST' };
  if (url !== null) {
    attributes['url.full'] = `${url.origin}${url.pathname}`;
    attributes['server.address'] = url.hostname;
    attributes['server.port'] = Number(url.port || 443);
  }
  if (delivery.attempts > 1) attributes['http.request.resend_count'] = delivery.attempts - 1;
  return tracer.startSpan('POST', { kind: SpanKind.CLIENT, attributes });
}

function producerSpan(delivery: ClaimedDelivery, target: BrokerTarget): Span {
  const rabbit = target.kind === 'amqp';
  const destination = rabbit ? target.exchange : target.subject;
  const attributes: Record<string, string | number> = {
    'messaging.system': rabbit ? 'rabbitmq' : 'nats',
    'messaging.operation.type': 'send',
    'messaging.destination.name': destination,
    'messaging.message.id': delivery.eventId,
    'server.address': target.host,
    'server.port': target.port,
  };
  if (rabbit) attributes['messaging.rabbitmq.destination.routing_key'] = target.routingKey;
  return tracer.startSpan(`send ${destination}`, { kind: SpanKind.PRODUCER, attributes });
}

/** Ends a span with the attempt's outcome. */
function ended(span: Span, result: SendResult): void {
  if (result.status !== null) span.setAttribute('http.response.status_code', result.status);
  const failed = !result.acknowledged && (result.status === null || result.status >= 300);
  if (failed) {
    span.setAttribute('error.type', result.errorClass ?? String(result.status));
    span.setStatus({ code: SpanStatusCode.ERROR, message: result.error ?? undefined });
  }
  span.end();
}
