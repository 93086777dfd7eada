import { context, ROOT_CONTEXT, trace } from '@opentelemetry/api';
import { deliveryRequest, deliveryUserAgent } from '../domain/delivery-request.ts';
import { destinationKind } from '../domain/destinations.ts';
import type { SecretBox } from '../lib/secret-box.ts';
import { traceparentOf, tracing } from '../lib/tracing.ts';
import { ended, processSpan, sendSpan } from './attempt-spans.ts';
import type { BrokerSender } from './broker-sender.ts';
import type { SendResult, WebhookSender } from './http-sender.ts';
import { ReceiverCredentials } from './receiver-credentials.ts';
import { SigningKeys } from './signing-keys.ts';
import type { ClaimedDelivery } from './types.ts';

/** What an attempt that failed on our side before or during the send is recorded as. */
export const INTERNAL_FAILURE: SendResult = Object.freeze({
  status: null,
  error: 'internal',
  errorClass: 'internal',
  body: '',
});

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
    if (!tracing.on) return this.send(delivery, now, false);
    const span = processSpan(delivery);
    return context
      .with(trace.setSpan(ROOT_CONTEXT, span), () => this.send(delivery, now, true))
      .then(
        (result) => {
          ended(span, result);
          return result;
        },
        (error: unknown) => {
          ended(span, INTERNAL_FAILURE);
          throw error;
        },
      );
  }

  /** `traced`: the POST then gets a client span of its own. */
  private send(delivery: ClaimedDelivery, now: Date, traced: boolean): Promise<SendResult> {
    const event = {
      id: delivery.eventId,
      type: delivery.eventType,
      data: delivery.data,
      isTest: delivery.isTest,
      sequence: delivery.sequence,
    };
    const at = now.toISOString();
    const { body, headers } = deliveryRequest(
      event,
      Math.floor(now.getTime() / 1000),
      this.keys.hmac(delivery, at),
      {
        requestId: `${delivery.id}.${delivery.attempts}`,
        attempt: delivery.attempts,
        userAgent: this.userAgent,
      },
      {
        standardWebhooks: delivery.standardWebhooks,
        keyPairs:
          delivery.standardWebhooks && delivery.asymmetricSignatures
            ? this.keys.ed25519(delivery, at)
            : [],
      },
    );
    if (!traced) return this.transmit(delivery, headers, body);
    return this.tracedSend(delivery, headers, body);
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

  /** The send in a span of its own, whose context goes along when the subscription asks. */
  private async tracedSend(
    delivery: ClaimedDelivery,
    headers: Record<string, string>,
    body: string,
  ): Promise<SendResult> {
    const span = sendSpan(delivery);
    if (delivery.propagateTraceContext) {
      const traceparent = traceparentOf(span);
      if (traceparent !== null) headers.traceparent = traceparent;
      const tracestate = span.spanContext().traceState?.serialize();
      if (tracestate) headers.tracestate = tracestate;
    }
    const result = await this.transmit(delivery, headers, body);
    ended(span, result);
    return result;
  }
}
