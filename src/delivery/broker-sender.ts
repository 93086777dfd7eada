import { readFileSync } from 'node:fs';
import { type ConnectionOptions, rootCertificates } from 'node:tls';
import { literalAddress } from '../domain/address-guard.ts';
import { type BrokerTarget, brokerTarget } from '../domain/destinations.ts';
import { SECRET_MASK } from '../domain/redaction.ts';
import { BoundedMap } from '../lib/bounded-map.ts';
import { withDeadline } from '../lib/deadline.ts';
import { AmqpSender } from './amqp-sender.ts';
import type { BrokerDeps, BrokerMessage } from './broker-outcomes.ts';
import type { SendResult } from './http-sender.ts';
import { NatsSender } from './nats-sender.ts';

const TIMED_OUT: SendResult = Object.freeze({
  status: null,
  error: 'timeout',
  errorClass: 'timeout',
  body: '',
});

const MAX_CACHED_TARGETS = 4096;

/**
 * Delivers to brokers: each attempt within the time-out, through the destination's pooled
 * connection (see LinkPool), its password put back into the masked URL only here. Never throws.
 */
export class BrokerSender {
  private readonly amqp: AmqpSender;
  private readonly nats: NatsSender;
  private readonly targets = new BoundedMap<string, BrokerTarget | null>(MAX_CACHED_TARGETS);
  private readonly timeoutMs: number;

  constructor(deps: BrokerDeps) {
    this.timeoutMs = deps.timeoutMs;
    this.amqp = new AmqpSender(deps);
    this.nats = new NatsSender(deps);
  }

  async send(url: string, password: string | null, message: BrokerMessage): Promise<SendResult> {
    const target = this.target(url);
    if (target === null) {
      return { status: null, error: 'invalid url', errorClass: 'address_blocked', body: '' };
    }
    // The pool's key names the password too: a changed password is a new connection. (A newline
    // never stands in a stored URL, so the two parts cannot run together.)
    const key = password === null ? url : `${url}\n${password}`;
    const sent =
      target.kind === 'amqp'
        ? this.amqp.send(key, target, password, message)
        : this.nats.send(key, target, password, message);
    const result = await withDeadline(sent, this.timeoutMs, () => TIMED_OUT);
    // Brokers do not echo passwords; should one, its words are kept without it (a password of a
    // few characters would only garble them).
    if (password === null || password.length < 4 || !result.body.includes(password)) return result;
    return { ...result, body: result.body.replaceAll(password, SECRET_MASK) };
  }

  private target(url: string): BrokerTarget | null {
    const cached = this.targets.get(url);
    if (cached !== undefined) return cached;
    let parsed: URL | null = null;
    try {
      parsed = new URL(url);
    } catch {
      // Stored URLs were checked; one that no longer parses fails its attempts.
    }
    const checked = parsed === null ? null : brokerTarget(parsed);
    return this.targets.remember(url, checked?.ok ? checked.target : null);
  }

  async close(): Promise<void> {
    await Promise.all([this.amqp.close(), this.nats.close()]);
  }
}

/** TLS options for broker hosts: the system roots plus `caFile`, checked against the host name. */
export function brokerTlsOptions(caFile: string | null): (host: string) => ConnectionOptions {
  const ca = caFile === null ? undefined : [...rootCertificates, readFileSync(caFile, 'utf8')];
  return (host) => {
    const literal = literalAddress(host);
    // A literal address has no server name to send; the certificate is checked against it.
    return literal === null ? { ca, servername: host } : { ca };
  };
}
