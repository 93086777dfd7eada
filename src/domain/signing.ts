import { createHmac, randomBytes } from 'node:crypto';

const KEY_PREFIX = 'whsec_';

/** `whsec_` + 43 base64url chars (256 random bits), the shape Stripe-style receivers expect. */
export function newSigningKey(): string {
  return `${KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
}

/**
 * `Service-Signature` value: `t=<unix seconds>,v1=<hex>[,v1=<hex>]`, one v1 per key, each a
 * lower-case hex HMAC-SHA256 keyed by the whole key string over `<t>.<body>`. `body` must be the
 * exact string sent (as UTF-8); re-serialising the payload after signing breaks every signature.
 *
 * keys: the current key first, then the legacy key while it still signs. Receivers holding
 * either key accept the delivery, as Stripe's constructEvent accepts a header when any v1 matches.
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
