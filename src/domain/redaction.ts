/**
 * What keeps a credential the product sent (a receiver's header value or password, an OAuth2
 * client secret or access token) out of what it shows: an attempt's response body, a failure's
 * words, a span. A server may echo its request in any of the forms it travelled in, so each
 * secret is searched for as sent and as encoded on the way: form- and percent-encoded, JSON-escaped,
 * and inside the base64 of an HTTP Basic pair.
 */

/**
 * What a secret reads as wherever it is shown: a stored secret in a read (a PATCH that sends it
 * back keeps the stored one), a credential a receiver echoed.
 */
export const SECRET_MASK = '***';

/** Every form in which `secret` may come back. */
function formsOf(secret: string): string[] {
  return [
    secret,
    encodeURIComponent(secret),
    new URLSearchParams({ v: secret }).toString().slice(2),
    JSON.stringify(secret).slice(1, -1),
    JSON.stringify(secret).slice(1, -1).replaceAll('/', '\\/'),
  ];
}

/** A Basic pair's base64 (the `Authorization` value less `Basic `), in the alphabets it may use. */
function base64Forms(text: string): string[] {
  const standard = Buffer.from(text, 'utf8').toString('base64');
  const unpadded = standard.replace(/=+$/, '');
  return [standard, unpadded, Buffer.from(text, 'utf8').toString('base64url')];
}

/**
 * The searchable forms of what was sent: `secrets` (values sent as they are) and `basicPairs`
 * (`user:password` texts sent base64 in an `Authorization: Basic` header, whose parts are secrets
 * too). Longest first, so a longer form is masked whole before a shorter one inside it.
 */
export function credentialForms(secrets: readonly string[], basicPairs: readonly string[] = []) {
  const forms = new Set<string>();
  for (const secret of secrets) for (const form of formsOf(secret)) forms.add(form);
  for (const pair of basicPairs) for (const form of base64Forms(pair)) forms.add(form);
  forms.delete('');
  return [...forms].sort((a, b) => b.length - a.length);
}

/** `text` with every form masked as SECRET_MASK. */
export function redacted(text: string, forms: readonly string[]): string {
  let out = text;
  for (const form of forms) if (out.includes(form)) out = out.replaceAll(form, SECRET_MASK);
  return out;
}
