import type { Span } from '@opentelemetry/api';
import {
  deliveryBody,
  deliveryRequest,
  deliveryUserAgent,
  type StoredEvent,
} from '../domain/delivery-request.ts';
import { destinationKind } from '../domain/destinations.ts';
import { TRANSFORMATION_FAILED, transformedBody } from '../domain/transformation.ts';
import type { SecretBox } from '../lib/secret-box.ts';
import { traceparentOf, tracing } from '../lib/tracing.ts';
import { type TransformationRunner, transformedRequest } from '../transformations/runner.ts';
import { traced } from './attempt-spans.ts';
import type { BrokerSender } from './broker-sender.ts';
import type { SendResult, WebhookSender } from './http-sender.ts';
import { ReceiverCredentials } from './receiver-credentials.ts';
import { SigningKeys } from './signing-keys.ts';
import type { ClaimedDelivery } from './types.ts';

/**
 * One attempt of a delivery: its request (the exact bytes, signed by every live key: SigningKeys),
 * reshaped first by the subscription's transformation when it has one (run in the sandbox: what
 * it returns is what is signed and sent, or nothing when it cancels), the POST with its receiver
 * authentication (ReceiverCredentials) or a broker's publish (the same
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
      transformations: TransformationRunner;
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
  private async send(delivery: ClaimedDelivery, now: Date, span: Span | null): Promise<SendResult> {
    const event: StoredEvent = {
      id: delivery.eventId,
      type: delivery.eventType,
      data: delivery.data,
      isTest: delivery.isTest,
      sequence: delivery.sequence,
    };
    const created = Math.floor(now.getTime() / 1000);
    let body = deliveryBody(event, created, delivery.payload);
    let target = delivery;
    let extra: Record<string, string> = {};
    if (delivery.transformation !== null) {
      const outcome = await transformedRequest(
        this.deps.transformations,
        delivery,
        delivery.eventType,
        body,
        created,
      );
      if (!outcome.ok) return transformationFailed(outcome.error);
      if (outcome.result.cancel) return CANCELLED;
      body = transformedBody(outcome.result);
      extra = outcome.result.headers;
      if (outcome.result.url !== delivery.url) target = { ...delivery, url: outcome.result.url };
    }
    const { secrets, keyPairs } = this.keys.forAttempt(delivery, now.toISOString());
    const signed = deliveryRequest(
      event,
      created,
      secrets,
      {
        requestId: `${delivery.id}.${delivery.attempts}`,
        attempt: delivery.attempts,
        userAgent: this.userAgent,
      },
      { standardWebhooks: delivery.standardWebhooks, keyPairs, body },
    );
    // A transformation's headers never name ours (checkedResult refuses them): nothing is lost.
    const headers = { ...extra, ...signed.headers };
    if (span !== null && delivery.propagateTraceContext) {
      const traceparent = traceparentOf(span);
      if (traceparent !== null) headers.traceparent = traceparent;
      const tracestate = span.spanContext().traceState?.serialize();
      if (tracestate) headers.tracestate = tracestate;
    }
    return this.transmit(target, headers, body);
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

/** An attempt its transformation cancelled: it succeeded, nothing sent. */
const CANCELLED: SendResult = Object.freeze({
  status: null,
  error: null,
  errorClass: null,
  body: '',
  cancelled: true,
});

/** An attempt whose transformation failed: its message is what the attempt log keeps. */
function transformationFailed(message: string): SendResult {
  return {
    status: null,
    error: 'transformation failed',
    errorClass: TRANSFORMATION_FAILED,
    body: message,
  };
}
