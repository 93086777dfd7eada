import type { KeyObject } from 'node:crypto';
import {
  context,
  type Link,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { deliveryRequest, deliveryUserAgent } from '../domain/delivery-request.ts';
import { type BrokerTarget, brokerTarget, destinationKind } from '../domain/destinations.ts';
import {
  type OAuth2ClientCredentials,
  type ReceiverSecrets,
  receiverHeaders,
} from '../domain/receiver-auth.ts';
import { credentialForms, redacted } from '../domain/redaction.ts';
import { ed25519SigningKey, liveRetiredKeys, type RetiredKey } from '../domain/signing.ts';
import { BoundedMap } from '../lib/bounded-map.ts';
import type { SecretBox } from '../lib/secret-box.ts';
import { ATTR, spanContextOf, traceparentOf, tracer, tracing } from '../lib/tracing.ts';
import type { BrokerSender } from './broker-sender.ts';
import type { ClientTls, SendResult, WebhookSender } from './http-sender.ts';
import { ReceiverTokens } from './receiver-tokens.ts';
import type { ClaimedDelivery } from './types.ts';

const KEY_CACHE_LIMIT = 10_000;

/** A subscription's receiver authentication, opened: fixed headers, and OAuth2 credentials. */
interface ReceiverAuthOpened {
  headers: Record<string, string>;
  oauth: OAuth2ClientCredentials | null;
  /** The client certificate presented (mutual TLS), named by the sealed secrets. */
  tls: ClientTls | undefined;
  /** Every form of the secrets the receiver is sent, masked in what its answer shows. */
  sentForms: string[];
}

/** What an attempt that failed on our side before or during the send is recorded as. */
export const INTERNAL_FAILURE: SendResult = Object.freeze({
  status: null,
  error: 'internal',
  errorClass: 'internal',
  body: '',
});

/**
 * One attempt of a delivery: its request (the exact bytes, signed by every live key), the POST or
 * a broker's publish (the same body, the headers as message headers), and its spans when tracing
 * is on. A failure on this side (a key that does not open, a fault in the
 * sender) is thrown to the caller, which records it as an attempt of class `internal`.
 */
export class AttemptRunner {
  private readonly userAgent: string;
  /** Opened keys by sealed text (current keys, and each retired list as stored). */
  private readonly keys = new BoundedMap<string, string>(KEY_CACHE_LIMIT);
  /** Ed25519 key objects by sealed text. */
  private readonly pairs = new BoundedMap<string, KeyObject>(KEY_CACHE_LIMIT);
  private readonly retired = new BoundedMap<string, readonly RetiredKey[]>(KEY_CACHE_LIMIT);
  /** What receiver authentication adds, by sealed secrets. */
  private readonly receiverAuth = new BoundedMap<string, ReceiverAuthOpened>(KEY_CACHE_LIMIT);
  private readonly tokens: ReceiverTokens;

  constructor(
    private readonly deps: {
      secrets: SecretBox;
      sender: WebhookSender;
      brokers: BrokerSender;
      publicBaseUrl: string;
    },
  ) {
    this.userAgent = deliveryUserAgent(deps.publicBaseUrl);
    this.tokens = new ReceiverTokens({ sender: deps.sender, userAgent: this.userAgent });
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
    const { body, headers } = deliveryRequest(
      event,
      Math.floor(now.getTime() / 1000),
      this.signingKeys(delivery, now.toISOString()),
      {
        requestId: `${delivery.id}.${delivery.attempts}`,
        attempt: delivery.attempts,
        userAgent: this.userAgent,
      },
      {
        standardWebhooks: delivery.standardWebhooks,
        keyPairs:
          delivery.standardWebhooks && delivery.asymmetricSignatures
            ? this.keyPairs(delivery, now.toISOString())
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
      if (delivery.receiverSecrets === null) {
        return this.deps.sender.send(delivery.url, headers, body);
      }
      const sealed = delivery.receiverSecrets;
      const { oauth, tls, sentForms, ...opened } = this.openReceiverAuth(sealed, delivery);
      Object.assign(headers, opened.headers);
      const sent =
        oauth === null
          ? this.deps.sender.send(delivery.url, headers, body, undefined, tls)
          : this.sendWithToken(delivery.url, headers, body, sealed, oauth, tls);
      // A receiver that echoes its request shows none of the secrets it was sent.
      return sent.then((result) => masked(result, sentForms));
    }
    const password =
      delivery.urlPassword === null
        ? null
        : this.open(delivery.urlPassword, delivery.subscriptionId);
    const { 'content-type': _json, ...messageHeaders } = headers;
    return this.deps.brokers.send(delivery.url, password, {
      eventId: delivery.eventId,
      body,
      headers: messageHeaders,
    });
  }

  /** The send in a client span, whose context goes along when the subscription asks. */
  private async tracedSend(
    delivery: ClaimedDelivery,
    headers: Record<string, string>,
    body: string,
  ): Promise<SendResult> {
    const span = clientSpan(delivery);
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

  /**
   * The current key, then every retired key still within the expiry promised for it; each opened
   * once.
   */
  private signingKeys(delivery: ClaimedDelivery, now: string): string[] {
    const keys = [this.open(delivery.signingKey, delivery.subscriptionId)];
    for (const { key } of this.liveRetired(delivery, now)) {
      keys.push(this.open(key, delivery.subscriptionId));
    }
    return keys;
  }

  /** The current Ed25519 key, then each retired with a key still within its promised expiry. */
  private keyPairs(delivery: ClaimedDelivery, now: string): KeyObject[] {
    const sealed = [delivery.signingKeyPair];
    for (const { pair } of this.liveRetired(delivery, now)) sealed.push(pair ?? null);
    const pairs: KeyObject[] = [];
    for (const one of sealed) {
      if (one === null) continue;
      pairs.push(
        this.pairs.get(one) ??
          this.pairs.remember(
            one,
            ed25519SigningKey(this.deps.secrets.decrypt(one, delivery.subscriptionId)),
          ),
      );
    }
    return pairs;
  }

  private liveRetired(delivery: ClaimedDelivery, now: string): RetiredKey[] {
    if (delivery.retiredSigningKeys === '[]') return [];
    const stored = delivery.retiredSigningKeys;
    const retired =
      this.retired.get(stored) ?? this.retired.remember(stored, JSON.parse(stored) as RetiredKey[]);
    return liveRetiredKeys(retired, now);
  }

  /**
   * The POST with an OAuth2 access token; a 401 from the receiver gets one new token and one
   * more POST, within the attempt, before the attempt counts as failed.
   */
  private async sendWithToken(
    url: string,
    headers: Record<string, string>,
    body: string,
    key: string,
    oauth: OAuth2ClientCredentials,
    tls: ClientTls | undefined,
  ): Promise<SendResult> {
    const first = await this.tokens.token(key, oauth);
    if ('failure' in first) return first.failure;
    headers.authorization = `Bearer ${first.token}`;
    const answer = await this.deps.sender.send(url, headers, body, undefined, tls);
    if (answer.status !== 401) return masked(answer, credentialForms([first.token]));
    const renewed = await this.tokens.token(key, oauth, first.token);
    if ('failure' in renewed) return renewed.failure;
    headers.authorization = `Bearer ${renewed.token}`;
    const again = await this.deps.sender.send(url, headers, body, undefined, tls);
    return masked(again, credentialForms([first.token, renewed.token]));
  }

  private openReceiverAuth(sealed: string, delivery: ClaimedDelivery): ReceiverAuthOpened {
    const cached = this.receiverAuth.get(sealed);
    if (cached !== undefined) return cached;
    const secrets = JSON.parse(
      this.deps.secrets.decrypt(sealed, delivery.subscriptionId),
    ) as ReceiverSecrets;
    const certificate = secrets.clientCertificate ?? null;
    const basic = secrets.auth?.type === 'basic' ? secrets.auth : null;
    return this.receiverAuth.remember(sealed, {
      headers: receiverHeaders(secrets),
      oauth: secrets.auth?.type === 'oauth2_client_credentials' ? secrets.auth : null,
      tls: certificate === null ? undefined : { id: sealed, ...certificate },
      sentForms: credentialForms(
        [...Object.values(secrets.headers), ...(basic === null ? [] : [basic.password])],
        basic === null ? [] : [`${basic.username}:${basic.password}`],
      ),
    });
  }

  private open(sealed: string, subscriptionId: string): string {
    return (
      this.keys.get(sealed) ??
      this.keys.remember(sealed, this.deps.secrets.decrypt(sealed, subscriptionId))
    );
  }
}

/** The result with every form of the credentials sent masked in the body the attempt log keeps. */
function masked(result: SendResult, forms: readonly string[]): SendResult {
  if (forms.length === 0 || result.body === '') return result;
  const body = redacted(result.body, forms);
  return body === result.body ? result : { ...result, body };
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
function clientSpan(delivery: ClaimedDelivery): Span {
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
