import {
  createHmac,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
  sign,
} from 'node:crypto';

const KEY_PREFIX = 'whsec_';

/**
 * `whsec_` + 44 letters and digits: the base64 of 33 random bytes, drawn again until it holds no
 * `+` or `/` (264 bits less about two). Both verifier families accept the one string: Stripe's
 * libraries key their HMAC with the whole string, Standard Webhooks' with the base64-decoded
 * bytes after the prefix; and it needs no quoting in an env file or a shell.
 */
export function newSigningKey(): string {
  for (;;) {
    const encoded = randomBytes(33).toString('base64');
    if (!/[+/]/.test(encoded)) return `${KEY_PREFIX}${encoded}`;
  }
}

const STANDARD_KEY = /^whsec_(?:[A-Za-z0-9+/]{4})+(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Whether Standard Webhooks' verifiers can use the key: its part after `whsec_` must be base64.
 * Keys made before that (43 base64url characters) are not: a subscription rotates its key first.
 */
export function servesStandardWebhooks(key: string): boolean {
  return STANDARD_KEY.test(key);
}

/**
 * `webhook-signature` (Standard Webhooks): `v1,<base64 HMAC-SHA256>` over
 * `<webhook-id>.<webhook-timestamp>.<body>`, keyed by the decoded key, one per key that can
 * serve (current first), space separated. Empty when none can.
 */
export function standardSignature(
  messageId: string,
  timestampSeconds: number,
  body: string,
  keys: readonly string[],
): string {
  const signed = `${messageId}.${timestampSeconds}.`;
  const signatures: string[] = [];
  for (const key of keys) {
    if (!servesStandardWebhooks(key)) continue;
    const secret = Buffer.from(key.slice(KEY_PREFIX.length), 'base64');
    const mac = createHmac('sha256', secret).update(signed).update(body).digest('base64');
    signatures.push(`v1,${mac}`);
  }
  return signatures.join(' ');
}

/**
 * `Service-Signature` value: `t=<unix seconds>,v1=<hex>[,v1=<hex>]`, one v1 per key, each a
 * lower-case hex HMAC-SHA256 keyed by the whole key string over `<t>.<body>`. `body` must be the
 * exact string sent (as UTF-8); re-serialising the payload after signing breaks every signature.
 *
 * keys: the current key first, then each retired key still within its promised expiry (see
 * liveRetiredKeys). Receivers holding any of them accept the delivery, as Stripe's
 * constructEvent accepts a header when any v1 matches.
 */
export function signatureHeader(
  timestampSeconds: number,
  body: string,
  keys: readonly string[],
): string {
  // Receivers parseInt the t= value: a fraction or exponent would sign other text than they check.
  if (!Number.isSafeInteger(timestampSeconds) || timestampSeconds < 0) {
    throw new RangeError('signatureHeader: timestampSeconds must be a non-negative integer');
  }
  if (keys.length === 0) throw new RangeError('signatureHeader: at least one signing key');
  const prefix = `${timestampSeconds}.`;
  let header = `t=${timestampSeconds}`;
  for (const key of keys) {
    // Catches a sealed (still encrypted) or empty key, which would sign silently but never verify.
    if (!key.startsWith(KEY_PREFIX)) {
      throw new TypeError('signatureHeader: a signing key must start with whsec_');
    }
    // Two updates instead of one concatenated string: large bodies are not copied per key.
    header += `,v1=${createHmac('sha256', key).update(prefix).update(body).digest('hex')}`;
  }
  return header;
}

/** A key a rotation retired (sealed, as stored), and until when it was promised to sign. */
export interface RetiredKey {
  key: string;
  expiresAt: string;
  /** The Ed25519 secret key retired with it (sealed), when the subscription signs with one. */
  pair?: string;
}

const SECRET_KEY_PREFIX = 'whsk_';
const PUBLIC_KEY_PREFIX = 'whpk_';
/** DER framing of a raw Ed25519 key: PKCS #8 before the 32-byte seed, SPKI before the public key. */
const PKCS8_ED25519 = Buffer.from('302e020100300506032b657004220420', 'hex');
const SPKI_ED25519_LENGTH = 12;

/**
 * A Standard Webhooks asymmetric key pair: `whsk_` + base64 of the 32-byte Ed25519 seed (kept
 * sealed by us, never shown) and `whpk_` + base64 of the raw 32-byte public key (shown to the
 * receiver, who verifies with it and holds nothing that can sign).
 */
export function newSigningKeyPair(): { secretKey: string; publicKey: string } {
  const { privateKey } = generateKeyPairSync('ed25519');
  const der = privateKey.export({ format: 'der', type: 'pkcs8' });
  const secretKey = `${SECRET_KEY_PREFIX}${der.subarray(PKCS8_ED25519.length).toString('base64')}`;
  return { secretKey, publicKey: publicKeyOf(secretKey) };
}

/** The `whsk_` secret key as a key object that signs. */
export function ed25519SigningKey(secretKey: string): KeyObject {
  if (!secretKey.startsWith(SECRET_KEY_PREFIX)) {
    throw new TypeError('an Ed25519 signing key must start with whsk_');
  }
  const seed = Buffer.from(secretKey.slice(SECRET_KEY_PREFIX.length), 'base64');
  if (seed.length !== 32) throw new TypeError('an Ed25519 signing key holds 32 bytes');
  return createPrivateKey({
    key: Buffer.concat([PKCS8_ED25519, seed]),
    format: 'der',
    type: 'pkcs8',
  });
}

/** The `whpk_` public key of a `whsk_` secret key. */
function publicKeyOf(secretKey: string): string {
  const spki = createPublicKey(ed25519SigningKey(secretKey)).export({
    format: 'der',
    type: 'spki',
  });
  return `${PUBLIC_KEY_PREFIX}${spki.subarray(SPKI_ED25519_LENGTH).toString('base64')}`;
}

/**
 * Standard Webhooks' asymmetric signatures: `v1a,<base64 Ed25519 signature>` of
 * `<webhook-id>.<webhook-timestamp>.<body>`, one per live key pair (current first).
 */
export function asymmetricSignatures(
  messageId: string,
  timestampSeconds: number,
  body: string,
  keys: readonly KeyObject[],
): string[] {
  if (keys.length === 0) return [];
  const signed = Buffer.from(`${messageId}.${timestampSeconds}.${body}`);
  return keys.map((key) => `v1a,${sign(null, signed, key).toString('base64')}`);
}

/**
 * The retired keys that still sign at `now` (ISO 8601): each until the expiry promised for it when
 * it was retired, however many rotations came since.
 */
export function liveRetiredKeys(keys: readonly RetiredKey[], now: string): RetiredKey[] {
  return keys.filter((retired) => retired.expiresAt > now);
}

/**
 * The list after a rotation at `now`: the key current until now (with its key pair, if any),
 * promised `expiresAt`, first, then the earlier ones that still sign (an expired one signs
 * nothing and is dropped).
 */
export function retireKey(
  stored: string,
  current: string,
  expiresAt: string,
  now: string,
  pair: string | null = null,
): string {
  const live = liveRetiredKeys(JSON.parse(stored) as RetiredKey[], now);
  const retired: RetiredKey =
    pair === null ? { key: current, expiresAt } : { key: current, expiresAt, pair };
  return JSON.stringify([retired, ...live]);
}

/**
 * The stored list with every retired key pair dropped (their HMAC keys kept): turning asymmetric
 * signatures off ends every pair, so turning them on again signs by the new pair alone.
 */
export function dropRetiredPairs(stored: string): string {
  const keys = JSON.parse(stored) as RetiredKey[];
  return JSON.stringify(keys.map(({ key, expiresAt }) => ({ key, expiresAt })));
}
