import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import { createSecureContext, rootCertificates } from 'node:tls';
import { Agent } from 'undici';
import { type AddressGuard, literalAddress } from '../domain/address-guard.ts';
import { type AttemptErrorClass, RESPONSE_EXCERPT_BYTES } from '../domain/attempts.ts';
import { tlsWords } from '../domain/receiver-auth.ts';
import { BoundedMap } from '../lib/bounded-map.ts';
import { deadline } from '../lib/deadline.ts';

/**
 * What one send came to, whatever the destination: an HTTP answer (`status`), a broker's
 * acknowledgement (`acknowledged`, no status), or a failure (`error`).
 */
export interface SendResult {
  /** An HTTP response's status, once its head arrived; null for a broker, or no answer. */
  status: number | null;
  /** A broker took the message (its publisher confirm, its stream's ack). */
  acknowledged?: true;
  /**
   * null when a whole HTTP answer arrived; else a short reason: 'timeout', 'blocked address',
   * 'connection refused', 'connection reset', 'tls error', 'host name does not resolve',
   * 'host unreachable', 'invalid url', 'invalid request', 'sender closed', 'request failed'. A
   * response whose body stalls past the time-out has both a status and error 'timeout'.
   */
  error: string | null;
  /** The class of `error`, or `redirect` / `body_too_large` for such answers; null otherwise. */
  errorClass: AttemptErrorClass | null;
  /** The first RESPONSE_EXCERPT_BYTES of the response body, as text; '' when none arrived. */
  body: string;
  /** The `Retry-After` header of a 429 or 503 answer, as sent; else absent. */
  retryAfter?: string;
  /**
   * The receiver's side refused our credentials before anything was sent (its OAuth2 token
   * server answered 4xx): only its owner can mend that, so auto-pause counts it as a 4xx.
   */
  credentialsRefused?: true;
  /** The subscription's transformation cancelled it: nothing was sent, and it succeeded. */
  cancelled?: true;
}

/** What an attempt that failed on our side before or during the send is recorded as. */
export const INTERNAL_FAILURE: SendResult = Object.freeze({
  status: null,
  error: 'internal',
  errorClass: 'internal',
  body: '',
});

export interface SenderOptions {
  guard: AddressGuard;
  /** Budget of one attempt, from connecting to the last byte of the response. */
  timeoutMs: number;
  /** PEM file of an extra CA to trust besides the system roots (tests, private endpoints). */
  caFile: string | null;
  connectionsPerOrigin?: number;
}

/** Response bodies are read up to this and discarded; a longer one costs its connection. */
export const MAX_RESPONSE_BYTES = 64 * 1024;
/** Parsed endpoint URLs kept; endpoints are few and each is posted to again and again. */
const MAX_CACHED_TARGETS = 4096;
/** Agents with a client certificate kept open; past this, all are closed and made again. */
const MAX_CLIENT_AGENTS = 1000;

/** A TLS client certificate to present, named by `id` (the same id, the same agent). */
export interface ClientTls {
  id: string;
  certificate: string;
  privateKey: string;
}

type Target = { origin: string; path: string } | { invalid: SendResult };

// Shared, so frozen: a caller that mutated one would change every later answer.
const BLOCKED: SendResult = Object.freeze({
  status: null,
  error: 'blocked address',
  errorClass: 'address_blocked',
  body: '',
});
const INVALID_URL: SendResult = Object.freeze({
  status: null,
  error: 'invalid url',
  errorClass: 'address_blocked',
  body: '',
});

const CLASS_BY_ERROR = new Map<string, AttemptErrorClass>(
  Object.entries({
    timeout: 'timeout',
    'blocked address': 'address_blocked',
    'invalid url': 'address_blocked',
    'connection refused': 'connection_refused',
    'host unreachable': 'connection_refused',
    'connection reset': 'connection_reset',
    'tls error': 'tls',
    'host name does not resolve': 'dns',
  }),
);

/** An error's class; any other failure of the connection counts as a reset. */
export function classOf(error: string): AttemptErrorClass {
  return CLASS_BY_ERROR.get(error) ?? 'connection_reset';
}

const TLS_VERIFY_CODES = new Set([
  'EPROTO',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_DECRYPT_CERT_SIGNATURE',
  'UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY',
  'CERT_SIGNATURE_FAILURE',
  'CERT_NOT_YET_VALID',
  'CERT_HAS_EXPIRED',
  'CERT_REVOKED',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'CERT_CHAIN_TOO_LONG',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'ERROR_IN_CERT_NOT_BEFORE_FIELD',
  'ERROR_IN_CERT_NOT_AFTER_FIELD',
  'HOSTNAME_MISMATCH',
  'INVALID_CA',
  'INVALID_PURPOSE',
  'PATH_LENGTH_EXCEEDED',
]);

const ERROR_BY_CODE = new Map<string, string>(
  Object.entries({
    EADDRBLOCKED: 'blocked address',
    ECONNREFUSED: 'connection refused',
    ECONNRESET: 'connection reset',
    EPIPE: 'connection reset',
    UND_ERR_SOCKET: 'connection reset',
    UND_ERR_CLOSED: 'sender closed',
    UND_ERR_DESTROYED: 'sender closed',
    ETIMEDOUT: 'timeout',
    UND_ERR_CONNECT_TIMEOUT: 'timeout',
    UND_ERR_HEADERS_TIMEOUT: 'timeout',
    UND_ERR_BODY_TIMEOUT: 'timeout',
    ENOTFOUND: 'host name does not resolve',
    ENODATA: 'host name does not resolve',
    EAI_AGAIN: 'host name does not resolve',
    EHOSTUNREACH: 'host unreachable',
    ENETUNREACH: 'host unreachable',
    EHOSTDOWN: 'host unreachable',
    ENETDOWN: 'host unreachable',
    UND_ERR_INVALID_ARG: 'invalid request',
    ERR_INVALID_CHAR: 'invalid request',
  }),
);

/**
 * Posts webhook payloads over one pooled undici Agent. Connections go only to addresses the
 * guard allows at connect time (its `lookup`, plus a check here of literal IP hosts, for which
 * Node never calls `lookup`); redirects are not followed, so a 3xx comes back as its status.
 */
export class WebhookSender {
  private readonly agent: Agent;
  private readonly guard: AddressGuard;
  private readonly timeoutMs: number;
  private readonly targets = new BoundedMap<string, Target>(MAX_CACHED_TARGETS);
  /** Agents presenting a client certificate, by its id (mutual TLS). */
  private readonly clientAgents = new Map<string, Agent>();
  private readonly connectionsPerOrigin: number;
  /** The roots and the extra CA, when one is configured (made once: every agent trusts them). */
  private readonly ca: string[] | undefined;

  constructor(options: SenderOptions) {
    this.connectionsPerOrigin = options.connectionsPerOrigin ?? 32;
    this.guard = options.guard;
    this.timeoutMs = options.timeoutMs;
    this.ca =
      options.caFile === null
        ? undefined
        : [...rootCertificates, readFileSync(options.caFile, 'utf8')];
    // undici 7 follows no redirects unless the redirect interceptor is composed in.
    this.agent = this.newAgent();
  }

  /**
   * An agent whose connections pass the guard; one secure context for all of them (building one
   * per connection from the whole root store is costly), with a client certificate when given.
   */
  private newAgent(client?: ClientTls): Agent {
    const secureContext =
      this.ca === undefined && client === undefined
        ? undefined
        : createSecureContext({ ca: this.ca, cert: client?.certificate, key: client?.privateKey });
    // undici's own timers tick coarsely and can fire before their delay: they stand a second
    // behind the attempt's own timer (send), which decides WEBHOOK_TIMEOUT_MS.
    const backstopMs = this.timeoutMs + 1_000;
    return new Agent({
      connections: this.connectionsPerOrigin,
      headersTimeout: backstopMs,
      bodyTimeout: backstopMs,
      connect: { timeout: backstopMs, lookup: this.guard.lookup, secureContext },
    });
  }

  private agentFor(client: ClientTls | undefined): Agent {
    if (client === undefined) return this.agent;
    let agent = this.clientAgents.get(client.id);
    if (agent === undefined) {
      if (this.clientAgents.size >= MAX_CLIENT_AGENTS) {
        for (const old of this.clientAgents.values()) void old.close();
        this.clientAgents.clear();
      }
      agent = this.newAgent(client);
      this.clientAgents.set(client.id, agent);
    }
    return agent;
  }

  /**
   * One HTTPS POST. Never throws. `keepBytes`: how much of the answer's body to keep (an excerpt
   * for the attempt log by default; a token server's whole answer).
   */
  async send(
    url: string,
    headers: Record<string, string>,
    body: string,
    keepBytes = RESPONSE_EXCERPT_BYTES,
    client?: ClientTls,
  ): Promise<SendResult> {
    const target = this.target(url);
    if ('invalid' in target) return target.invalid;

    // This bounds the whole attempt (undici's timeouts only back it up, see newAgent). The signal
    // is an EventEmitter, which undici takes as one: an AbortController and its EventTarget cost
    // a send several times as much, for the one event neither sends in most attempts.
    const abort = new EventEmitter();
    let timedOut = false;
    const timer = deadline(this.timeoutMs, () => {
      timedOut = true;
      abort.emit('abort');
    });
    let status: number | null = null;
    const kept: Buffer[] = [];
    let keptBytes = 0;
    try {
      const response = await this.agentFor(client).request({
        origin: target.origin,
        path: target.path,
        method: 'POST',
        headers,
        body,
        signal: abort,
      });
      status = response.statusCode;
      const retryAfter =
        status === 429 || status === 503 ? response.headers['retry-after'] : undefined;
      // Read up to the limit, keeping the start; a longer answer costs its connection.
      let received = 0;
      let tooLarge = false;
      for await (const chunk of response.body as AsyncIterable<Buffer>) {
        received += chunk.length;
        if (keptBytes < keepBytes) {
          const part = chunk.subarray(0, keepBytes - keptBytes);
          kept.push(part);
          keptBytes += part.length;
        }
        if (received > MAX_RESPONSE_BYTES) {
          tooLarge = true;
          response.body.destroy();
          break;
        }
      }
      const errorClass: AttemptErrorClass | null = tooLarge
        ? 'body_too_large'
        : status >= 300 && status < 400
          ? 'redirect'
          : null;
      const result: SendResult = { status, error: null, errorClass, body: excerpt(kept) };
      if (typeof retryAfter === 'string') result.retryAfter = retryAfter;
      return result;
    } catch (error) {
      const reason = timedOut ? 'timeout' : describeError(error);
      const errorClass = classOf(reason);
      // A TLS failure has no answer to show: its words say which side refused, and why.
      let shown = '';
      if (errorClass === 'tls' && keptBytes === 0) shown = tlsFailure(error, client !== undefined);
      else if (status === null && client !== undefined && errorClass === 'connection_reset') {
        shown = CLOSED_WITH_CERTIFICATE;
      }
      return { status, error: reason, errorClass, body: shown || excerpt(kept) };
    } finally {
      timer.cancel();
    }
  }

  async close(): Promise<void> {
    await Promise.all([
      this.agent.close(),
      ...[...this.clientAgents.values()].map((a) => a.close()),
    ]);
  }

  private target(url: string): Target {
    return this.targets.get(url) ?? this.targets.remember(url, this.parseTarget(url));
  }

  private parseTarget(url: string): Target {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return { invalid: INVALID_URL };
    }
    if (parsed.protocol !== 'https:' || parsed.username !== '' || parsed.password !== '') {
      return { invalid: INVALID_URL };
    }
    // Node connects to an IP literal without calling the guard's lookup: check it here.
    const literal = literalAddress(parsed.hostname);
    if (literal !== null && !this.guard.isAllowedAddress(literal)) return { invalid: BLOCKED };
    return { origin: parsed.origin, path: parsed.pathname + parsed.search };
  }
}

/** The kept start of a body as text (a cut multi-byte character becomes U+FFFD). */
function excerpt(chunks: Buffer[]): string {
  return chunks.length === 0 ? '' : Buffer.concat(chunks).toString('utf8');
}

/**
 * Under TLS 1.3 the client's handshake ends before the server judges its certificate: a server
 * that refuses it closes the connection, and the alert it sends is lost to the HTTP client.
 */
const CLOSED_WITH_CERTIFICATE =
  'The receiver closed the connection without answering; under TLS 1.3 that is how a receiver refuses a client certificate it does not accept.';

/** Codes of a client certificate this side could not load: the owner's to mend. */
const OWN_CERTIFICATE_CODES = new Set([
  'ERR_SSL_EE_KEY_TOO_SMALL',
  'ERR_SSL_CA_MD_TOO_WEAK',
  'ERR_OSSL_X509_KEY_VALUES_MISMATCH',
]);

/**
 * A TLS failure in words: the receiver's certificate refused here (with the check that failed),
 * the receiver refusing the handshake (an alert it sent, often about the client certificate), or
 * a client certificate this side could not present.
 */
function tlsFailure(error: unknown, presented: boolean): string {
  const code = (error as NodeJS.ErrnoException | null)?.code ?? '';
  const words = tlsWords(error);
  if (code === 'ERR_SSL_WRONG_VERSION_NUMBER') {
    return `TLS: the receiver does not speak TLS on this port (${words}): is it plain HTTP?`;
  }
  if (OWN_CERTIFICATE_CODES.has(code)) {
    return `TLS: the subscription's client certificate cannot be presented: ${words}`;
  }
  if (/alert/i.test(words)) {
    const hint = presented ? '; check that it accepts the client certificate' : '';
    return `TLS: the receiver refused the handshake (${words})${hint}`;
  }
  if (code.startsWith('ERR_TLS_CERT') || (TLS_VERIFY_CODES.has(code) && code !== 'EPROTO')) {
    return `TLS: the receiver's certificate was refused here: ${words} (${code})`;
  }
  return `TLS: the handshake failed: ${words}`;
}

export function describeError(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  if (typeof code !== 'string') return 'request failed';
  const known = ERROR_BY_CODE.get(code);
  if (known !== undefined) return known;
  if (code.startsWith('ERR_TLS_') || code.startsWith('ERR_SSL_') || TLS_VERIFY_CODES.has(code)) {
    return 'tls error';
  }
  return 'request failed';
}
