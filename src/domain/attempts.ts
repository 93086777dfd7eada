/**
 * Why an attempt produced no usable answer: `timeout`, `connection_refused`,
 * `connection_reset` (also any other failure of the connection), `dns`, `tls`, `address_blocked`
 * (refused by the address guard before connecting), `redirect` (a 3xx, not followed; its status is
 * kept), `body_too_large` (the answer went on past 64 KiB and was cut; its status is kept) and
 * `internal` (a failure on our side before or during the attempt: a signing key that does not
 * decrypt, say; it follows the retry cascade like the others). A broker destination's failures
 * add `broker_refused` (the broker said no: a nack, an unroutable message, an unknown exchange or
 * stream, refused credentials; its words are kept as the response body) and `broker_busy` (it
 * pushes back: RabbitMQ blocked the connection, or JetStream answered 503 or 429).
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
  'broker_refused',
  'broker_busy',
  'auth_failed',
  'transformation_failed',
] as const;
export type AttemptErrorClass = (typeof ATTEMPT_ERROR_CLASSES)[number];

/**
 * A delivery's `lastError`: its last attempt's error class, or `worker_lost` when it was
 * dead-lettered because its claims kept dying with their worker (see WORKER_LOSSES_LIMIT).
 */
export const DELIVERY_ERRORS = [...ATTEMPT_ERROR_CLASSES, 'worker_lost'] as const;
export type DeliveryError = (typeof DELIVERY_ERRORS)[number];

/**
 * A claim that died with its worker is sent again, its attempt never counted as made; the
 * delivery whose claims die this many times in a row is a crash loop, dead-lettered `worker_lost`.
 */
export const WORKER_LOSSES_LIMIT = 3;

/** How much of a response body an attempt keeps, for the customer to see what went wrong. */
export const RESPONSE_EXCERPT_BYTES = 1024;

/**
 * Text a receiver sent, as the attempt log can keep it: PostgreSQL's text holds no NUL character,
 * and one in an answer would fail the whole batch's recording, others' attempts with it; it is
 * kept as U+FFFD, as an invalid UTF-8 byte already is.
 */
export function storableText(text: string): string {
  return text.includes('\u0000') ? text.replaceAll('\u0000', '\uFFFD') : text;
}
