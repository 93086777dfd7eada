import { createHmac, createPublicKey, type KeyObject, timingSafeEqual, verify } from 'node:crypto';
import type { webhooks } from './api.d.ts';

/** Each body a subscription can receive, in either form. */
type AnyBody = {
  [K in keyof webhooks]: webhooks[K]['post'] extends {
    requestBody: { content: { 'application/json': infer E } };
  }
    ? E
    : never;
}[keyof webhooks];

/** A thin `data`: ids and `changed`, the names of the members that moved. */
type ThinData = { data: { changed: string[] } };

/** Every event a subscription with `payload: full` (the default) receives, discriminated by `type`. */
export type WebhookEvent = Exclude<AnyBody, ThinData>;

/**
 * What a subscription with `payload: thin` receives: the event's ids and the names of the members
 * that changed (`data.changed`), discriminated by `type`. Fetch the full body with
 * `events.get(id)`.
 */
export type ThinWebhookEvent = Extract<AnyBody, ThinData>;

/** Whether a verified event is a thin one (its `data` has `changed` and no `object`). */
export function isThinEvent(event: WebhookEvent | ThinWebhookEvent): event is ThinWebhookEvent {
  return Array.isArray((event.data as { changed?: unknown }).changed);
}

/**
 * The check a delivery failed, by the name the Python, Go and PHP verifiers give it too. A
 * `BodyNotRaw` is a `NoMatchingSignature` whose body is not as the service sends it: it was
 * parsed and serialised again.
 */
export type VerificationCheck =
  | 'InvalidKey'
  | 'MissingHeader'
  | 'MalformedHeader'
  | 'TimestampOutsideTolerance'
  | 'NoMatchingSignature'
  | 'BodyNotRaw';

/** A delivery that must be refused: answer it with a 4xx and do not act on it. */
export class WebhookVerificationError extends Error {
  constructor(
    message: string,
    /** Which check failed. */
    readonly check: VerificationCheck,
  ) {
    super(message);
    this.name = 'WebhookVerificationError';
  }
}

export interface VerifyOptions {
  /** Largest distance between `t` and now, either way (default 300 s, as Stripe's). */
  toleranceSeconds?: number;
  /** Now, in Unix seconds (tests). */
  now?: number;
}

type Headers = Record<string, string | string[] | undefined> | { get(name: string): string | null };

function header(headers: Headers, name: string): string | undefined {
  if (typeof (headers as { get?: unknown }).get === 'function') {
    return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  }
  const record = headers as Record<string, string | string[] | undefined>;
  const key = Object.keys(record).find((k) => k.toLowerCase() === name);
  const value = key === undefined ? undefined : record[key];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * Verifies a delivery and returns its event. With `Service-Signature` (`t=<unix seconds>,v1=<hex>…`)
 * it must hold a `v1` that is the HMAC-SHA256 of `<t>.<raw body>` under one of `signingKeys` (both
 * the old and the new key during a rotation); without it, the Standard Webhooks headers must
 * (`webhook-signature` `v1,<base64>` of `<webhook-id>.<webhook-timestamp>.<raw body>`, keyed by the
 * base64 after `whsec_`). A `whpk_` key (the subscription's `publicKey`, with
 * `asymmetricSignatures` on) verifies a `v1a` Ed25519 signature of the same text instead: the
 * receiver then holds no secret that can sign. Compared in constant time; the timestamp must be within
 * `toleranceSeconds` of now. `rawBody` must be the bytes received, before any JSON parsing.
 * Throws WebhookVerificationError otherwise. Deduplicate on the event's `id`; a `sequence` past
 * the next one expected means a missed event: pull it with `webhooks.events(id, { after })`.
 * A subscription with `payload: thin` names its type: `verifyWebhook<ThinWebhookEvent>(…)`.
 */
export function verifyWebhook<E extends WebhookEvent | ThinWebhookEvent = WebhookEvent>(
  rawBody: string | Uint8Array,
  headers: Headers,
  signingKeys: string | readonly string[],
  options: VerifyOptions = {},
): E {
  // One check for both forms: the signature covers whichever body was sent.
  return verifiedEvent(rawBody, headers, signingKeys, options) as E;
}

function verifiedEvent(
  rawBody: string | Uint8Array,
  headers: Headers,
  signingKeys: string | readonly string[],
  options: VerifyOptions,
): WebhookEvent {
  const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : Buffer.from(rawBody);
  const given = typeof signingKeys === 'string' ? [signingKeys] : signingKeys;
  const publicKeys = given.filter((key) => key.startsWith(PUBLIC_KEY_PREFIX));
  const keys = given.filter((key) => key.startsWith(SIGNING_KEY_PREFIX));
  if (given.length === 0 || publicKeys.length + keys.length < given.length) {
    const what = given.length === 0 ? 'no key given' : 'a key is neither whsec_ nor whpk_';
    throw new WebhookVerificationError(what, 'InvalidKey');
  }
  if (publicKeys.length > 0) {
    try {
      return verifyAsymmetric(body, headers, publicKeys, options);
    } catch (error) {
      if (keys.length === 0) throw error;
    }
  }
  const signature = header(headers, 'service-signature');
  if (!signature) {
    if (header(headers, 'webhook-signature')) return verifyStandard(body, headers, keys, options);
    throw new WebhookVerificationError(
      'no Service-Signature or webhook-signature header',
      'MissingHeader',
    );
  }
  let timestamp: number | undefined;
  const candidates: Buffer[] = [];
  for (const part of signature.split(',')) {
    const [name, value] = part.split('=', 2);
    if (name === 't' && /^\d+$/.test(value ?? '')) timestamp = Number(value);
    if (name === 'v1' && /^[0-9a-f]{64}$/.test(value ?? '')) {
      candidates.push(Buffer.from(value, 'hex'));
    }
  }
  if (timestamp === undefined || candidates.length === 0) {
    throw new WebhookVerificationError('Service-Signature has no t or no v1', 'MalformedHeader');
  }
  checkTimestamp(timestamp, options);
  const macs = keys.map((key) =>
    createHmac('sha256', key).update(`${timestamp}.`).update(body).digest(),
  );
  return signedEvent(body, macs, candidates);
}

/**
 * The event, when one of the signatures sent (`candidates`) is one of `macs` (one per key); else
 * WebhookVerificationError. Every pair is compared, so the time taken does not tell which matched.
 */
function signedEvent(body: Buffer, macs: readonly Buffer[], candidates: readonly Buffer[]) {
  let valid = false;
  for (const mac of macs) {
    for (const candidate of candidates) {
      if (candidate.length === mac.length && timingSafeEqual(mac, candidate)) valid = true;
    }
  }
  if (!valid) refuse(body, 'no signature matches the signing keys');
  return JSON.parse(body.toString('utf8')) as WebhookEvent;
}

/** Throws NoMatchingSignature, or BodyNotRaw when the body cannot be one the service sent. */
function refuse(body: Buffer, message: string): never {
  if (notAsSent(body)) {
    throw new WebhookVerificationError(
      `${message}, and the body is not as the service sends it: it was parsed and serialised again; verify the bytes received`,
      'BodyNotRaw',
    );
  }
  throw new WebhookVerificationError(message, 'NoMatchingSignature');
}

const SHORT_ESCAPES = new Set([0x08, 0x09, 0x0a, 0x0c, 0x0d]);

/**
 * Whether the body cannot be one the service sent: it sends compact JSON that starts with the
 * event id, escapes only what JSON requires (lower-case hex), and never writes `\/`.
 */
function notAsSent(body: Buffer): boolean {
  if (body.subarray(0, 7).toString('latin1') !== '{"id":"') return true;
  let inString = false;
  for (let i = 0; i < body.length; i++) {
    const byte = body[i];
    if (inString && byte === 0x5c) {
      const escaped = body[i + 1];
      if (escaped === 0x2f) return true;
      if (escaped === 0x75) {
        const digits = body.subarray(i + 2, i + 6).toString('latin1');
        if (!/^[0-9a-f]{4}$/.test(digits)) return true;
        const code = Number.parseInt(digits, 16);
        if (SHORT_ESCAPES.has(code) || (code >= 0x20 && (code < 0xd800 || code > 0xdfff))) {
          return true;
        }
        i += 5;
      } else {
        i += 1;
      }
    } else if (byte === 0x22) {
      inString = !inString;
    } else if (!inString && (byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d)) {
      return true;
    }
  }
  return false;
}

function checkTimestamp(timestamp: number, options: VerifyOptions): void {
  const now = options.now ?? Math.floor(Date.now() / 1000);
  const tolerance = options.toleranceSeconds ?? 300;
  if (Math.abs(now - timestamp) > tolerance) {
    throw new WebhookVerificationError(
      `the timestamp is more than ${tolerance} s from now`,
      'TimestampOutsideTolerance',
    );
  }
}

/**
 * The Standard Webhooks headers: `webhook-id`, a `webhook-timestamp` within the tolerance, and the
 * signatures of one version (`v1` HMAC, `v1a` Ed25519) in `webhook-signature`, decoded.
 */
function standardHeaders(headers: Headers, version: 'v1' | 'v1a', options: VerifyOptions) {
  const id = header(headers, 'webhook-id');
  const stamp = header(headers, 'webhook-timestamp');
  const signature = header(headers, 'webhook-signature');
  if (!id || !stamp || !signature) {
    const missing = 'webhook-signature, webhook-id or webhook-timestamp missing';
    throw new WebhookVerificationError(missing, 'MissingHeader');
  }
  if (!/^\d+$/.test(stamp)) {
    throw new WebhookVerificationError('webhook-timestamp is not Unix seconds', 'MalformedHeader');
  }
  checkTimestamp(Number(stamp), options);
  const signatures = signature
    .split(' ')
    .filter((part) => part.startsWith(`${version},`))
    .map((part) => Buffer.from(part.slice(version.length + 1), 'base64'));
  if (signatures.length === 0) {
    throw new WebhookVerificationError(`webhook-signature has no ${version}`, 'MalformedHeader');
  }
  return { id, stamp, signatures };
}

/** The Standard Webhooks header set (see verifyWebhook). */
function verifyStandard(
  body: Buffer,
  headers: Headers,
  keys: readonly string[],
  options: VerifyOptions,
): WebhookEvent {
  const { id, stamp, signatures: candidates } = standardHeaders(headers, 'v1', options);
  const macs = keys.map((key) => {
    const secret = Buffer.from(key.replace(/^whsec_/, ''), 'base64');
    return createHmac('sha256', secret).update(`${id}.${stamp}.`).update(body).digest();
  });
  return signedEvent(body, macs, candidates);
}

const PUBLIC_KEY_PREFIX = 'whpk_';
const SIGNING_KEY_PREFIX = 'whsec_';
/** DER framing of a raw Ed25519 public key (SubjectPublicKeyInfo). */
const SPKI_ED25519 = Buffer.from('302a300506032b6570032100', 'hex');

function ed25519PublicKey(key: string): KeyObject {
  const raw = Buffer.from(key.slice(PUBLIC_KEY_PREFIX.length), 'base64');
  if (raw.length !== 32) {
    throw new WebhookVerificationError(`${key.slice(0, 9)}… is not a whpk_ key`, 'InvalidKey');
  }
  return createPublicKey({ key: Buffer.concat([SPKI_ED25519, raw]), format: 'der', type: 'spki' });
}

/** `v1a` (Ed25519) signatures of the Standard Webhooks header set (see verifyWebhook). */
function verifyAsymmetric(
  body: Buffer,
  headers: Headers,
  publicKeys: readonly string[],
  options: VerifyOptions,
): WebhookEvent {
  const { id, stamp, signatures } = standardHeaders(headers, 'v1a', options);
  const signed = Buffer.concat([Buffer.from(`${id}.${stamp}.`), body]);
  const valid = publicKeys
    .map(ed25519PublicKey)
    .some((key) => signatures.some((signature) => verify(null, signed, key, signature)));
  if (!valid) refuse(body, 'no v1a signature matches the public keys');
  return JSON.parse(body.toString('utf8')) as WebhookEvent;
}
