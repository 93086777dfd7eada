import { SECRET_MASK } from './redaction.ts';

/**
 * Where a subscription's deliveries go: an HTTPS endpoint, or a broker the tenant runs, named by
 * its URL's scheme: RabbitMQ (`amqps://`, or `amqp://` where private targets are allowed) or NATS
 * JetStream (`tls://`, or `nats://`). A broker URL may carry credentials; the password is stored
 * sealed, apart from the URL, which keeps `***` in its place (see splitPassword), so every read of
 * the URL (API, portal, logs, spans) shows the mask.
 */

interface Scheme {
  kind: 'amqp' | 'nats';
  /** Encrypted on the wire: allowed on every instance. */
  tls: boolean;
  defaultPort: number;
}

const BROKER_SCHEMES = new Map<string, Scheme>([
  ['amqps:', { kind: 'amqp', tls: true, defaultPort: 5671 }],
  ['amqp:', { kind: 'amqp', tls: false, defaultPort: 5672 }],
  ['tls:', { kind: 'nats', tls: true, defaultPort: 4222 }],
  ['nats:', { kind: 'nats', tls: false, defaultPort: 4222 }],
]);

/** A RabbitMQ destination: publish to `exchange` with `routingKey` in `vhost`. */
export interface AmqpTarget {
  kind: 'amqp';
  tls: boolean;
  host: string;
  port: number;
  username: string;
  vhost: string;
  exchange: string;
  routingKey: string;
}

/** A NATS JetStream destination: publish to `subject`, acknowledged by the stream that takes it. */
export interface NatsTarget {
  kind: 'nats';
  tls: boolean;
  host: string;
  port: number;
  username: string;
  subject: string;
}

export type BrokerTarget = AmqpTarget | NatsTarget;

/**
 * Which kind of destination a stored URL names, by its scheme: `https`, `amqp` or `nats`; null
 * for any other (never stored: the address guard refuses it). Without parsing the URL: it runs
 * once an attempt.
 */
export function destinationKind(url: string): 'https' | 'amqp' | 'nats' | null {
  const protocol = url.slice(0, url.indexOf(':') + 1).toLowerCase();
  if (protocol === 'https:') return 'https';
  return BROKER_SCHEMES.get(protocol)?.kind ?? null;
}

/** The scheme's rules, for a parsed broker URL; undefined for any other scheme. */
export function brokerScheme(protocol: string): Scheme | undefined {
  return BROKER_SCHEMES.get(protocol);
}

/**
 * A broker URL's destination, or why it is none (fit for a 422 on `url`). RabbitMQ URLs take the
 * virtual host as their path (none: `/`) and exactly `exchange` (empty: the default exchange) and
 * `routingKey` in their query; NATS URLs no path and exactly `subject`, a subject without
 * wildcards.
 */
export function brokerTarget(
  parsed: URL,
): { ok: true; target: BrokerTarget } | { ok: false; reason: string } {
  const scheme = BROKER_SCHEMES.get(parsed.protocol);
  if (scheme === undefined) return { ok: false, reason: 'is not a broker URL' };
  if (parsed.hostname === '') return { ok: false, reason: 'must name a host' };
  if (parsed.hash !== '') return { ok: false, reason: 'must not have a fragment' };
  const port = parsed.port === '' ? scheme.defaultPort : Number(parsed.port);
  const host = parsed.hostname;
  const username = decoded(parsed.username);
  const path = decoded(parsed.pathname);
  if (username === null || path === null || decoded(parsed.password) === null) {
    return { ok: false, reason: 'must percent-encode its user, password and path correctly' };
  }
  const params = [...parsed.searchParams.keys()];
  const expected = scheme.kind === 'amqp' ? ['exchange', 'routingKey'] : ['subject'];
  const unknown = params.find((name) => !expected.includes(name));
  if (unknown !== undefined) {
    return {
      ok: false,
      reason: `takes the query parameters ${expected.join(' and ')} only, not ${unknown}`,
    };
  }
  for (const name of expected) {
    if (parsed.searchParams.getAll(name).length !== 1) {
      return { ok: false, reason: `must have the query parameter ${name} once` };
    }
  }
  if (scheme.kind === 'amqp') {
    const vhost = path === '' || path === '/' ? '/' : path.slice(1);
    const exchange = parsed.searchParams.get('exchange') as string;
    const routingKey = parsed.searchParams.get('routingKey') as string;
    if (exchange.length > 255 || routingKey.length > 255) {
      return { ok: false, reason: 'exchange and routingKey must be at most 255 characters' };
    }
    return {
      ok: true,
      target: { kind: 'amqp', tls: scheme.tls, host, port, username, vhost, exchange, routingKey },
    };
  }
  if (parsed.pathname !== '' && parsed.pathname !== '/') {
    return { ok: false, reason: 'must have no path (the subject goes in ?subject=)' };
  }
  const subject = parsed.searchParams.get('subject') as string;
  if (!/^[^\s.*>]+(\.[^\s.*>]+)*$/.test(subject)) {
    return {
      ok: false,
      reason: 'subject must be dot-separated tokens without spaces or the wildcards * and >',
    };
  }
  return { ok: true, target: { kind: 'nats', tls: scheme.tls, host, port, username, subject } };
}

/**
 * A URL as stored and shown: its password replaced by SECRET_MASK, and the password itself
 * (percent-decoded), or null when it has none.
 */
export function splitPassword(url: string): { shown: string; password: string | null } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { shown: url, password: null };
  }
  const password = decoded(parsed.password);
  if (password === null || password === '') return { shown: url, password: null };
  parsed.password = SECRET_MASK;
  return { shown: parsed.href, password };
}

/**
 * Whether a PATCH's masked URL may keep the stored password: only for the same user at the same
 * scheme, host and port, so that a changed URL never carries the password to another server.
 */
export function keepsPassword(stored: string, sent: string): boolean {
  const [a, b] = [new URL(stored), new URL(sent)];
  return (
    a.protocol === b.protocol &&
    a.username === b.username &&
    a.host === b.host &&
    a.password === b.password
  );
}

/** A URL part percent-decoded; null when its encoding is malformed (`%ZZ`, a cut sequence). */
function decoded(part: string): string | null {
  try {
    return decodeURIComponent(part);
  } catch {
    return null;
  }
}
