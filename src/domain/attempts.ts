/**
 * Why an attempt produced no usable answer: `timeout`, `connection_refused`,
 * `connection_reset` (also any other failure of the connection), `dns`, `tls`, `address_blocked`
 * (refused by the address guard before connecting), `redirect` (a 3xx, not followed; its status is
 * kept), `body_too_large` (the answer went on past 64 KiB and was cut; its status is kept) and
 * `internal` (a failure on our side before or during the attempt: a signing key that does not
 * decrypt, say; it follows the retry cascade like the others).
 */
export const ATTEMPT_ERROR_CLASSES = [
  'timeout',
  'connection_refused',
  'connection_reset',
  'dns',
  'tls',
  'address_blocked',
  'redirect',
  'body_too_large',
  'internal',
] as const;
export type AttemptErrorClass = (typeof ATTEMPT_ERROR_CLASSES)[number];

/** How much of a response body an attempt keeps, for the customer to see what went wrong. */
export const RESPONSE_EXCERPT_BYTES = 1024;
