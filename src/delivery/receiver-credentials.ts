import {
  type OAuth2ClientCredentials,
  type ReceiverSecrets,
  receiverHeaders,
} from '../domain/receiver-auth.ts';
import { credentialForms, redacted } from '../domain/redaction.ts';
import { BoundedMap } from '../lib/bounded-map.ts';
import type { SecretBox } from '../lib/secret-box.ts';
import type { ClientTls, SendResult, WebhookSender } from './http-sender.ts';
import { ReceiverTokens } from './receiver-tokens.ts';
import type { ClaimedDelivery } from './types.ts';

const CACHE_LIMIT = 10_000;

/** A subscription's receiver authentication, opened: fixed headers, and OAuth2 credentials. */
interface Opened {
  headers: Record<string, string>;
  oauth: OAuth2ClientCredentials | null;
  /** The client certificate presented (mutual TLS), named by the sealed secrets. */
  tls: ClientTls | undefined;
  /** Every form of the secrets the receiver is sent, masked in what its answer shows. */
  sentForms: string[];
}

/**
 * A POST with the receiver authentication its subscription set: fixed headers or Basic, a
 * client certificate, an OAuth2 access token (fetched, kept, renewed once on a 401). What the
 * receiver answers keeps none of the credentials it was sent.
 */
export class ReceiverCredentials {
  /** Opened by sealed secrets (an edit seals new text, so an entry is never stale). */
  private readonly opened = new BoundedMap<string, Opened>(CACHE_LIMIT);
  private readonly tokens: ReceiverTokens;

  constructor(
    private readonly deps: { secrets: SecretBox; sender: WebhookSender; userAgent: string },
  ) {
    this.tokens = new ReceiverTokens({ sender: deps.sender, userAgent: deps.userAgent });
  }

  /** The POST of `body` to the delivery's URL; `headers` gain the credentials. */
  send(
    delivery: ClaimedDelivery,
    headers: Record<string, string>,
    body: string,
  ): Promise<SendResult> {
    const { sender } = this.deps;
    const sealed = delivery.receiverSecrets;
    if (sealed === null) return sender.send(delivery.url, headers, body);
    const { oauth, tls, sentForms, ...opened } = this.open(sealed, delivery);
    Object.assign(headers, opened.headers);
    const sent =
      oauth === null
        ? sender.send(delivery.url, headers, body, undefined, tls)
        : this.sendWithToken(delivery.url, headers, body, sealed, oauth, tls);
    // A receiver that echoes its request shows none of the secrets it was sent.
    return sent.then((result) => masked(result, sentForms));
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
    const { sender } = this.deps;
    const first = await this.tokens.token(key, oauth);
    if ('failure' in first) return first.failure;
    headers.authorization = `Bearer ${first.token}`;
    const answer = await sender.send(url, headers, body, undefined, tls);
    if (answer.status !== 401) return masked(answer, credentialForms([first.token]));
    const renewed = await this.tokens.token(key, oauth, first.token);
    if ('failure' in renewed) return renewed.failure;
    headers.authorization = `Bearer ${renewed.token}`;
    const again = await sender.send(url, headers, body, undefined, tls);
    return masked(again, credentialForms([first.token, renewed.token]));
  }

  private open(sealed: string, delivery: ClaimedDelivery): Opened {
    const cached = this.opened.get(sealed);
    if (cached !== undefined) return cached;
    const secrets = JSON.parse(
      this.deps.secrets.decrypt(sealed, delivery.subscriptionId),
    ) as ReceiverSecrets;
    const certificate = secrets.clientCertificate ?? null;
    const basic = secrets.auth?.type === 'basic' ? secrets.auth : null;
    return this.opened.remember(sealed, {
      headers: receiverHeaders(secrets),
      oauth: secrets.auth?.type === 'oauth2_client_credentials' ? secrets.auth : null,
      tls: certificate === null ? undefined : { id: sealed, ...certificate },
      sentForms: credentialForms(
        [...Object.values(secrets.headers), ...(basic === null ? [] : [basic.password])],
        basic === null ? [] : [`${basic.username}:${basic.password}`],
      ),
    });
  }
}

/** The result with every form of the credentials sent masked in the body the attempt log keeps. */
function masked(result: SendResult, forms: readonly string[]): SendResult {
  if (forms.length === 0 || result.body === '') return result;
  const body = redacted(result.body, forms);
  return body === result.body ? result : { ...result, body };
}
