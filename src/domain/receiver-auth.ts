import { createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';
import { createSecureContext } from 'node:tls';
import type { FieldErrors } from '../lib/problems.ts';
import { SECRET_MASK } from './redaction.ts';

/**
 * Receiver authentication: what a subscription adds to each HTTPS attempt so that a gateway in
 * front of the receiver lets it in: extra `headers`, an `auth` scheme (HTTP Basic, or an OAuth2
 * access token by the client credentials grant, RFC 6749 section 4.4), and a TLS
 * `clientCertificate`. The secrets (header values, the password, the client secret, the private
 * key) are stored sealed, apart from what reads show, where each is `***` or absent; a PATCH that
 * sends `***` back keeps the stored secret, but only while the endpoint's origin stays the same,
 * so that no edit can carry a secret to another server.
 */

const MAX_RECEIVER_HEADERS = 10;
const MAX_HEADER_VALUE = 4096;

/** RFC 9110 token characters: a header name. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$/;
/** Visible ASCII, spaces and tabs inside: a header value (no CR, LF or other controls). */
const HEADER_VALUE = /^[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?$/;

/** Names a subscription may never set beside the prefixes below: hop-by-hop, framing, tracing. */
const RESERVED_NAMES = new Set([
  'host',
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
  'user-agent',
  'traceparent',
  'tracestate',
  'baggage',
]);

interface BasicAuth {
  type: 'basic';
  username: string;
  password: string;
}

export interface OAuth2ClientCredentials {
  type: 'oauth2_client_credentials';
  tokenUrl: string;
  clientId: string;
  clientSecret: string;
  scope?: string;
  audience?: string;
}

/** `auth` as the API takes it (a secret may be SECRET_MASK in a PATCH). */
export type ReceiverAuthScheme = BasicAuth | OAuth2ClientCredentials;

type Masked<T, K extends keyof T> = Omit<T, K> & { [P in K]: typeof SECRET_MASK };

/** A TLS client certificate and its key, PEM, as the API takes them. */
export interface ClientCertificate {
  certificate: string;
  privateKey: string;
}

/** A client certificate as reads show it. */
interface ClientCertificateShown {
  subject: string;
  /** When it expires, ISO 8601. */
  notAfter: string;
  fingerprint256: string;
}

/** What a subscription's attempts carry, in clear: sealed as one JSON text when stored. */
export interface ReceiverSecrets {
  headers: Record<string, string>;
  auth: ReceiverAuthScheme | null;
  /** Absent in secrets stored before client certificates. */
  clientCertificate?: ClientCertificate | null;
}

/** What reads show: header names with masked values, the scheme with its secret masked. */
export interface ReceiverAuthShown {
  headers: Record<string, string>;
  auth: Masked<BasicAuth, 'password'> | Masked<OAuth2ClientCredentials, 'clientSecret'> | null;
  clientCertificate: ClientCertificateShown | null;
}

export const NO_RECEIVER_SECRETS: ReceiverSecrets = Object.freeze({
  headers: {},
  auth: null,
  clientCertificate: null,
});

/** The days before a client certificate's expiry from which it is counted as expiring. */
export const CERTIFICATE_WARNING_DAYS = 14;

/** Whether a certificate expiring at `notAfter` (ISO) expires within the warning, or has. */
export function expiresSoon(notAfter: string, nowMs: number): boolean {
  return Date.parse(notAfter) - nowMs < CERTIFICATE_WARNING_DAYS * 86_400_000;
}

/** A checked certificate's details as reads show them. */
function certificateShown(pem: string): ClientCertificateShown {
  const certificate = new X509Certificate(pem);
  return {
    subject: certificate.subject.split('\n').join(', '),
    notAfter: new Date(certificate.validTo).toISOString(),
    fingerprint256: certificate.fingerprint256,
  };
}

/**
 * What is wrong with a client certificate and its key at `now`, keyed by member; empty if none.
 * Refused here is what the TLS stack would refuse to present, so that no subscription is stored
 * whose every attempt would fail `tls`: a certificate outside its validity, a key that does not
 * match it, and one the TLS stack will not load (a key too weak for its security level, a
 * signature digest it no longer takes).
 */
function certificateFaults(input: ClientCertificate, now: Date): FieldErrors {
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(input.certificate);
  } catch {
    return { 'clientCertificate.certificate': ['is not a PEM certificate'] };
  }
  const starts = new Date(certificate.validFrom);
  if (starts.getTime() > now.getTime()) {
    return { 'clientCertificate.certificate': [`is not valid before ${starts.toISOString()}`] };
  }
  const expires = new Date(certificate.validTo);
  if (!(expires.getTime() > now.getTime())) {
    return { 'clientCertificate.certificate': [`expired on ${expires.toISOString()}`] };
  }
  let key: KeyObject;
  try {
    key = createPrivateKey(input.privateKey);
  } catch {
    return {
      'clientCertificate.privateKey': [
        'is not an unencrypted PEM private key (PKCS#8, PKCS#1 or SEC1)',
      ],
    };
  }
  if (!certificate.checkPrivateKey(key)) {
    return { 'clientCertificate.privateKey': ['does not match the certificate'] };
  }
  try {
    createSecureContext({ cert: input.certificate, key: input.privateKey });
  } catch (error) {
    return { 'clientCertificate.certificate': [unusableCertificate(error, key)] };
  }
  return {};
}

/** Why the TLS stack would not present a certificate, in the owner's words. */
function unusableCertificate(error: unknown, key: KeyObject): string {
  const code = (error as NodeJS.ErrnoException).code ?? '';
  const bits = key.asymmetricKeyDetails?.modulusLength;
  const size = bits === undefined ? '' : ` (${key.asymmetricKeyType} ${bits} bits)`;
  if (code === 'ERR_SSL_EE_KEY_TOO_SMALL') {
    return `cannot be presented: its key${size} is too weak for TLS's default security level: use a stronger key`;
  }
  if (code === 'ERR_SSL_CA_MD_TOO_WEAK') {
    return 'cannot be presented: its signature digest (MD5 or SHA-1) is too weak for TLS';
  }
  return `cannot be presented by TLS: ${tlsWords(error)}`;
}

/**
 * An OpenSSL error's reason and detail, without its codes, function and source position
 * (`…:error:0A000410:SSL routines:ssl3_read_bytes:sslv3 alert handshake failure:…:SSL alert
 * number 40` is `sslv3 alert handshake failure, SSL alert number 40`).
 */
export function tlsWords(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const openssl = /error:[0-9A-F]+:[^:]*:[^:]*:([^:\n]+)(?::[^:\n]*:\d+:([^\n]*))?/i.exec(message);
  if (openssl === null) return message.trim();
  return [openssl[1], openssl[2]]
    .filter((part) => part !== undefined && part.trim() !== '')
    .map((part) => part.trim())
    .join(', ');
}

/** The shown form of stored secrets. */
export function shownReceiverAuth(secrets: ReceiverSecrets): ReceiverAuthShown {
  return {
    headers: Object.fromEntries(Object.keys(secrets.headers).map((name) => [name, SECRET_MASK])),
    auth:
      secrets.auth === null
        ? null
        : secrets.auth.type === 'basic'
          ? { ...secrets.auth, password: SECRET_MASK }
          : { ...secrets.auth, clientSecret: SECRET_MASK },
    clientCertificate: secrets.clientCertificate
      ? certificateShown(secrets.clientCertificate.certificate)
      : null,
  };
}

/** Why a header name may not be set, or null. */
function nameFault(name: string, withAuth: boolean): string | null {
  const lower = name.toLowerCase();
  if (!HEADER_NAME.test(name)) return "is not a header name (letters, digits and !#$%&'*+.^_`|~-)";
  if (lower.startsWith('service-')) return 'is a header of ours (Service-…): it cannot be set';
  // Standard Webhooks names its headers `webhook-…`, and may add more: the prefix is theirs.
  if (lower.startsWith('webhook-')) {
    return 'is a Standard Webhooks header name (webhook-…): it cannot be set';
  }
  if (RESERVED_NAMES.has(lower) || lower.startsWith('proxy-')) {
    return 'is set by the sender or the connection: it cannot be set';
  }
  if (lower.startsWith('content-')) return 'describes the body we send: it cannot be set';
  if (lower === 'authorization' && withAuth) {
    return 'is what `auth` sends: set one or the other';
  }
  return null;
}

/**
 * Why a header may not be sent as given (its name, as nameFault says, or its value), or null:
 * the rule for a subscription's own headers and for those a transformation adds.
 */
export function headerFault(name: string, value: string, withAuth: boolean): string | null {
  const fault = nameFault(name, withAuth);
  if (fault !== null) return fault;
  if (value.length > MAX_HEADER_VALUE || !HEADER_VALUE.test(value)) return VALUE_FAULT;
  return null;
}

const VALUE_FAULT = `must be 1-${MAX_HEADER_VALUE} visible ASCII characters (spaces inside), no line breaks`;

/**
 * The secrets a create or PATCH leaves, from what it sends (`undefined`: unchanged; `null`: none)
 * and what is stored; `keep` says whether a masked value may stand for the stored one (the same
 * origin). Faults are keyed `headers.<name>` and `auth.<member>`.
 */
export function nextReceiverSecrets(
  input: ReceiverAuthInput,
  stored: ReceiverSecrets,
  keep: boolean,
  now: Date = new Date(),
): { secrets: ReceiverSecrets } | { errors: FieldErrors } {
  const errors: FieldErrors = {};
  // A certificate is no secret the receiver sees (its key never leaves): it follows the URL.
  let clientCertificate = stored.clientCertificate ?? null;
  if (input.clientCertificate !== undefined) {
    clientCertificate = input.clientCertificate;
    if (clientCertificate !== null)
      Object.assign(errors, certificateFaults(clientCertificate, now));
  }
  // Moving to another origin carries no stored secret along: each must be sent again (or null).
  if (!keep && input.headers === undefined && Object.keys(stored.headers).length > 0) {
    errors.headers = [MOVED];
  }
  if (!keep && input.auth === undefined && stored.auth !== null) errors.auth = [MOVED];
  const auth = nextAuth(input.auth, stored.auth, keep, errors);
  const headers: Record<string, string> = {};
  if (input.headers === undefined) {
    Object.assign(headers, stored.headers);
  } else if (input.headers !== null) {
    const names = Object.keys(input.headers);
    if (names.length > MAX_RECEIVER_HEADERS) {
      errors.headers = [`has ${names.length} headers; at most ${MAX_RECEIVER_HEADERS}`];
    }
    const seen = new Set<string>();
    for (const name of names) {
      const value = input.headers[name];
      const at = `headers.${name}`;
      const fault = nameFault(name, auth !== null);
      if (fault !== null) {
        errors[at] = [fault];
      } else if (seen.has(name.toLowerCase())) {
        errors[at] = ['is given twice (header names are case-insensitive)'];
      } else if (value === SECRET_MASK) {
        const kept = storedValue(stored.headers, name);
        if (kept === undefined || !keep) {
          errors[at] = [maskRefusal(kept === undefined ? 'no stored value' : 'another origin')];
        } else {
          headers[name] = kept;
        }
      } else if (value.length > MAX_HEADER_VALUE || !HEADER_VALUE.test(value)) {
        errors[at] = [VALUE_FAULT];
      } else {
        headers[name] = value;
      }
      seen.add(name.toLowerCase());
    }
  }
  if (input.headers === undefined && auth !== null) {
    for (const name of Object.keys(headers)) {
      if (name.toLowerCase() === 'authorization') {
        errors[`headers.${name}`] = ['is what `auth` sends: set one or the other'];
      }
    }
  }
  return Object.keys(errors).length > 0
    ? { errors }
    : { secrets: { headers, auth, clientCertificate } };
}

function nextAuth(
  input: ReceiverAuthScheme | null | undefined,
  stored: ReceiverAuthScheme | null,
  keep: boolean,
  errors: FieldErrors,
): ReceiverAuthScheme | null {
  if (input === undefined) return stored;
  if (input === null) return null;
  if (input.type === 'basic') {
    if (input.username.includes(':')) {
      errors['auth.username'] = [
        'may not contain ":" (HTTP Basic joins it to the password with one)',
      ];
    }
    if (input.password !== SECRET_MASK) return input;
    if (stored?.type !== 'basic' || !keep) {
      errors['auth.password'] = [
        maskRefusal(stored?.type !== 'basic' ? 'no stored value' : 'another origin'),
      ];
      return null;
    }
    return { ...input, password: stored.password };
  }
  if (input.clientSecret !== SECRET_MASK) return input;
  // The secret goes to the token server: kept only for the same one (and the same receiver).
  if (stored?.type !== 'oauth2_client_credentials' || !keep || stored.tokenUrl !== input.tokenUrl) {
    errors['auth.clientSecret'] = [
      stored?.type !== 'oauth2_client_credentials'
        ? maskRefusal('no stored value')
        : `${SECRET_MASK} keeps the stored secret only for the same tokenUrl and URL origin: send the secret itself`,
    ];
    return null;
  }
  return { ...input, clientSecret: stored.clientSecret };
}

function storedValue(headers: Record<string, string>, name: string): string | undefined {
  const lower = name.toLowerCase();
  const found = Object.keys(headers).find((stored) => stored.toLowerCase() === lower);
  return found === undefined ? undefined : headers[found];
}

const MOVED =
  'the URL moves to another origin, and stored secrets never follow it: send them again (or null)';

function maskRefusal(why: 'no stored value' | 'another origin'): string {
  return why === 'no stored value'
    ? `${SECRET_MASK} keeps a stored value, and there is none: send the value itself`
    : `${SECRET_MASK} keeps the stored value only while the URL's origin stays the same: send the value itself`;
}

/**
 * The headers an attempt adds for its receiver (`Authorization` for Basic; an OAuth2 access token
 * is added per attempt, see delivery/receiver-tokens.ts).
 */
export function receiverHeaders(secrets: ReceiverSecrets): Record<string, string> {
  if (secrets.auth?.type !== 'basic') return secrets.headers;
  const { username, password } = secrets.auth;
  return {
    ...secrets.headers,
    authorization: `Basic ${Buffer.from(`${username}:${password}`, 'utf8').toString('base64')}`,
  };
}

/** The receiver authentication members of a create or PATCH. */
export interface ReceiverAuthInput {
  headers?: Record<string, string> | null;
  auth?: ReceiverAuthScheme | null;
  clientCertificate?: ClientCertificate | null;
}

/** Whether a create or PATCH sets anything only an HTTPS endpoint can take. */
export function setsReceiverAuth(input: ReceiverAuthInput): boolean {
  return (
    (input.headers !== undefined &&
      input.headers !== null &&
      Object.keys(input.headers).length > 0) ||
    (input.auth !== undefined && input.auth !== null) ||
    (input.clientCertificate !== undefined && input.clientCertificate !== null)
  );
}

export function hasReceiverSecrets(secrets: ReceiverSecrets): boolean {
  return (
    Object.keys(secrets.headers).length > 0 ||
    secrets.auth !== null ||
    (secrets.clientCertificate ?? null) !== null
  );
}
