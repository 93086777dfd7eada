import type { Span } from '@opentelemetry/api';
import { deliveryRequest, deliveryUserAgent } from '../domain/delivery-request.ts';
import { destinationKind } from '../domain/destinations.ts';
import type { SecretBox } from '../lib/secret-box.ts';
import { traceparentOf, tracing } from '../lib/tracing.ts';
import { traced } from './attempt-spans.ts';
import type { BrokerSender } from './broker-sender.ts';
import type { SendResult, WebhookSender } from './http-sender.ts';
import { ReceiverCredentials } from './receiver-credentials.ts';
import { SigningKeys } from './signing-keys.ts';
import type { ClaimedDelivery } from './types.ts';

/**
 * One attempt of a delivery: its request (the exact bytes, signed by every live key: SigningKeys),
 * the POST with its receiver authentication (ReceiverCredentials) or a broker's publish (the same
 * body, the headers as message headers), and its spans when tracing is on (attempt-spans.ts). A
 * failure on this side (a key that does not open, a fault in the sender) is thrown to the caller,
 * which records it as an attempt of class `internal`.
 */
export class AttemptRunner {
  private readonly userAgent: string;
  private readonly keys: SigningKeys;
  private readonly credentials: ReceiverCredentials;

  constructor(
    private readonly deps: {
      secrets: SecretBox;
      sender: WebhookSender;
      brokers: BrokerSender;
      publicBaseUrl: string;
    },
  ) {
    this.userAgent = deliveryUserAgent(deps.publicBaseUrl);
    this.keys = new SigningKeys(deps.secrets);
    this.credentials = new ReceiverCredentials({ ...deps, userAgent: this.userAgent });
  }

  run(delivery: ClaimedDelivery, now: Date): Promise<SendResult> {
    if (!tracing.on) return this.send(delivery, now, null);
    return traced(delivery, (span) => this.send(delivery, now, span));
  }

  /** `span`: the send's, when traced, whose context goes along when the subscription asks. */
  private send(delivery: ClaimedDelivery, now: Date, span: Span | null): Promise<SendResult> {
    const event = {
      id: delivery.eventId,
      type: delivery.eventType,
      data: delivery.data,
      isTest: delivery.isTest,
      sequence: delivery.sequence,
    };
    const { secrets, keyPairs } = this.keys.forAttempt(delivery, now.toISOString());
    const { body, headers } = deliveryRequest(
      event,
      Math.floor(now.getTime() / 1000),
      secrets,
      {
        requestId: `${delivery.id}.${delivery.attempts}`,
        attempt: delivery.attempts,
        userAgent: this.userAgent,
      },
      { standardWebhooks: delivery.standardWebhooks, keyPairs, payload: delivery.payload },
    );
    if (span !== null && delivery.propagateTraceContext) {
      const traceparent = traceparentOf(span);
      if (traceparent !== null) headers.traceparent = traceparent;
      const tracestate = span.spanContext().traceState?.serialize();
      if (tracestate) headers.tracestate = tracestate;
    }
    return this.transmit(delivery, headers, body);
  }

  /** The POST, or the publish to a broker with the URL's password opened. */
  private transmit(
    delivery: ClaimedDelivery,
    headers: Record<string, string>,
    body: string,
  ): Promise<SendResult> {
    if (destinationKind(delivery.url) === 'https') {
      return this.credentials.send(delivery, headers, body);
    }
    const password =
      delivery.urlPassword === null
        ? null
        : this.keys.open(delivery.urlPassword, delivery.subscriptionId);
    const { 'content-type': _json, ...messageHeaders } = headers;
    return this.deps.brokers.send(delivery.url, password, {
      eventId: delivery.eventId,
      body,
      headers: messageHeaders,
    });
  }
}
