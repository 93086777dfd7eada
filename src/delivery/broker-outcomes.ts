import type { ConnectionOptions } from 'node:tls';
import type { AddressGuard } from '../domain/address-guard.ts';
import type { AttemptErrorClass } from '../domain/attempts.ts';
import { classOf, describeError, type SendResult } from './http-sender.ts';

/** What a broker sender needs. */
export interface BrokerDeps {
  guard: AddressGuard;
  /** Budget of one attempt: connecting, publishing and the broker's acknowledgement. */
  timeoutMs: number;
  /** A destination's connection unused this long is closed. */
  idleMs: number;
  /** TLS options for a broker host: the trusted CAs, and the name its certificate must have. */
  tlsOptions: (host: string) => ConnectionOptions;
}

/** One delivery attempt as a message: the HTTP body, and the delivery headers as its headers. */
export interface BrokerMessage {
  eventId: string;
  body: string;
  headers: Record<string, string>;
}

/** The broker acknowledged the message (a publisher confirm, a stream's ack). */
export const DELIVERED: SendResult = Object.freeze({
  status: null,
  acknowledged: true,
  error: null,
  errorClass: null,
  body: '',
});

/** A failure the broker reported, its words kept as the attempt's response body. */
export function brokerFailure(errorClass: AttemptErrorClass, words: string): SendResult {
  return { status: null, error: errorClass, errorClass, body: words.slice(0, 1024) };
}

/** Broker clients' codes for a broker that refused who we are or what we asked. */
const REFUSALS = new Set([
  'AUTHORIZATION_VIOLATION',
  'BAD_AUTHENTICATION',
  'AUTHENTICATION_EXPIRED',
  'PERMISSIONS_VIOLATION',
]);

/** The broker said no while we connected, in words we put together (its own were not given). */
export class BrokerRefusal extends Error {}

/** A failure to connect, classed like an HTTP attempt's (a refusal by the broker aside). */
export function connectionFailure(error: unknown): SendResult {
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : String(error);
  if (
    error instanceof BrokerRefusal ||
    (typeof code === 'string' && REFUSALS.has(code)) ||
    /^Handshake terminated|ACCESS.REFUSED|NOT.ALLOWED/.test(message)
  ) {
    return brokerFailure('broker_refused', message);
  }
  let reason = describeError(error);
  if (code === 'CONNECTION_REFUSED') reason = 'connection refused';
  // NATS: TLS refused or unavailable on the server, or a certificate that does not verify.
  else if (code === 'TLS' || code === 'SERVER_OPT_NA') reason = 'tls error';
  else if (code === 'TIMEOUT' || /ETIMEDOUT/.test(message)) reason = 'timeout';
  else if (reason === 'request failed') reason = 'connection reset';
  return { status: null, error: reason, errorClass: classOf(reason), body: message.slice(0, 1024) };
}
