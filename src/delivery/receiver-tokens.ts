import type { OAuth2ClientCredentials } from '../domain/receiver-auth.ts';
import { credentialForms, redacted } from '../domain/redaction.ts';
import { BoundedMap } from '../lib/bounded-map.ts';
import { MAX_RESPONSE_BYTES, type SendResult, type WebhookSender } from './http-sender.ts';

/**
 * OAuth2 access tokens for receivers, by the client credentials grant (RFC 6749 section 4.4):
 * fetched from the subscription's token endpoint through the same guarded sender as deliveries,
 * kept until shortly before `expires_in`, one fetch at a time per subscription however many
 * attempts need one. A token is never logged or stored; a failure is an attempt of class
 * `auth_failed` whose text keeps only the RFC 6749 `error` and `error_description` of the token
 * server's answer, bounded, with every form of the credentials sent masked: a server that echoes
 * its request shows nothing of them.
 */

export type TokenResult = { token: string } | { failure: SendResult };

interface Held {
  token: string;
  /** When to stop using it (ms since the epoch): shortly before it expires. */
  renewAt: number;
}

/** A token answer is read whole up to the sender's limit (a JWT with many claims runs to tens of KiB). */
const TOKEN_ANSWER_BYTES = MAX_RESPONSE_BYTES;
/** How much of a refusal's `error` and `error_description` is kept. */
const ERROR_CODE_CHARS = 100;
const ERROR_DESCRIPTION_CHARS = 300;
/** Used when the token server names no lifetime. */
const DEFAULT_LIFETIME_S = 300;
/** Renewed this share of its lifetime early, at most MAX_EARLY_MS. */
const EARLY_SHARE = 0.1;
const MAX_EARLY_MS = 30_000;
const HELD_LIMIT = 10_000;

export class ReceiverTokens {
  private readonly held = new BoundedMap<string, Held>(HELD_LIMIT);
  private readonly fetching = new Map<string, Promise<TokenResult>>();

  constructor(
    private readonly deps: { sender: WebhookSender; userAgent: string; now?: () => number },
  ) {}

  /**
   * A live token for the credentials `key` names (their sealed text: a new secret is a new key);
   * `rejected`: the receiver refused this one, so another is fetched unless one already was.
   */
  async token(key: string, auth: OAuth2ClientCredentials, rejected?: string): Promise<TokenResult> {
    const held = this.held.get(key);
    if (held !== undefined && held.token !== rejected && this.now() < held.renewAt) {
      return { token: held.token };
    }
    let pending = this.fetching.get(key);
    if (pending === undefined) {
      pending = this.fetch(key, auth).finally(() => this.fetching.delete(key));
      this.fetching.set(key, pending);
    }
    return pending;
  }

  private async fetch(key: string, auth: OAuth2ClientCredentials): Promise<TokenResult> {
    const form = new URLSearchParams({ grant_type: 'client_credentials' });
    if (auth.scope !== undefined) form.set('scope', auth.scope);
    if (auth.audience !== undefined) form.set('audience', auth.audience);
    // Client authentication by HTTP Basic, each part form-encoded first (RFC 6749 section 2.3.1).
    const client = `${formEncode(auth.clientId)}:${formEncode(auth.clientSecret)}`;
    const started = this.now();
    const answer = await this.deps.sender.send(
      auth.tokenUrl,
      {
        'content-type': 'application/x-www-form-urlencoded',
        accept: 'application/json',
        authorization: `Basic ${Buffer.from(client, 'utf8').toString('base64')}`,
        'user-agent': this.deps.userAgent,
      },
      form.toString(),
      TOKEN_ANSWER_BYTES,
    );
    if (answer.error !== null)
      return failed(`the token server could not be reached: ${answer.error}`);
    if (answer.status !== 200) {
      const sent = credentialForms(
        [auth.clientSecret],
        [client, `${auth.clientId}:${auth.clientSecret}`],
      );
      const words = `the token server answered ${answer.status}${refusal(answer.body, sent)}`;
      // RFC 6749 section 5.2: a 4xx is the credentials refused (invalid_client, invalid_scope…).
      const refused = answer.status !== null && answer.status >= 400 && answer.status < 500;
      return failed(words, refused);
    }
    if (answer.errorClass === 'body_too_large') {
      return failed(`the token server's answer is larger than ${TOKEN_ANSWER_BYTES / 1024} KiB`);
    }
    const parsed = tokenAnswer(answer.body);
    if (typeof parsed === 'string') return failed(`the token server's answer ${parsed}`);
    const lifetimeMs = (parsed.expiresIn ?? DEFAULT_LIFETIME_S) * 1000;
    const early = Math.min(lifetimeMs * EARLY_SHARE, MAX_EARLY_MS);
    this.held.remember(key, { token: parsed.token, renewAt: started + lifetimeMs - early });
    return { token: parsed.token };
  }

  private now(): number {
    return this.deps.now?.() ?? Date.now();
  }
}

/** The token and its lifetime from a token answer, or what is wrong with it. */
function tokenAnswer(body: string): { token: string; expiresIn: number | null } | string {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    return 'is not JSON';
  }
  const answer = json as { access_token?: unknown; token_type?: unknown; expires_in?: unknown };
  if (typeof answer.access_token !== 'string' || answer.access_token === '') {
    return 'has no access_token';
  }
  if (typeof answer.token_type !== 'string' || answer.token_type.toLowerCase() !== 'bearer') {
    return 'is not a bearer token (token_type)';
  }
  const expiresIn =
    typeof answer.expires_in === 'number' && answer.expires_in > 0 ? answer.expires_in : null;
  return { token: answer.access_token, expiresIn };
}

/**
 * A refusal's RFC 6749 `error` and `error_description` (section 5.2), bounded and with the
 * credentials sent masked; nothing else of the answer, which may echo the request.
 */
function refusal(body: string, sent: readonly string[]): string {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    return ' (no RFC 6749 error in its answer)';
  }
  const answer = (typeof json === 'object' && json !== null ? json : {}) as Record<string, unknown>;
  if (typeof answer.error !== 'string') return ' (no RFC 6749 error in its answer)';
  const shown = (text: string, limit: number) =>
    // Control characters would break the attempt log's one-line words.
    redacted(text, sent)
      .replace(/\p{Cc}+/gu, ' ')
      .slice(0, limit);
  const description =
    typeof answer.error_description === 'string'
      ? ` (${shown(answer.error_description, ERROR_DESCRIPTION_CHARS)})`
      : '';
  return `: ${shown(answer.error, ERROR_CODE_CHARS)}${description}`;
}

function failed(error: string, credentialsRefused = false): TokenResult {
  const failure: SendResult = { status: null, error, errorClass: 'auth_failed', body: error };
  return { failure: credentialsRefused ? { ...failure, credentialsRefused: true } : failure };
}

/** application/x-www-form-urlencoded, as RFC 6749 appendix B asks of the client's id and secret. */
function formEncode(value: string): string {
  return new URLSearchParams({ v: value }).toString().slice(2);
}
