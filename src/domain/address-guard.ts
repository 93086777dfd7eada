import dns from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { withDeadline } from '../lib/deadline.ts';
import { brokerScheme, brokerTarget } from './destinations.ts';

/** Every A/AAAA address of a host name. */
export type Resolver = (hostname: string) => Promise<string[]>;

/**
 * A resolver that asks the system's DNS servers (or `servers`) through c-ares, as
 * `dns.promises.Resolver` does: unlike `dns.lookup`, it takes no thread of libuv's small pool,
 * so names that never resolve cannot stall the process's other lookups (file system work and
 * crypto share that pool). `localhost` names are loopback (RFC 6761) without a query.
 */
export function caresResolver(options: { timeoutMs: number; servers?: string[] }): Resolver {
  const resolver = new dns.promises.Resolver({ timeout: options.timeoutMs, tries: 1 });
  if (options.servers) resolver.setServers(options.servers);
  return async (hostname) => {
    const name = hostname.toLowerCase().replace(/\.$/, '');
    if (name === 'localhost' || name.endsWith('.localhost')) return ['127.0.0.1', '::1'];
    const [v4, v6] = await Promise.allSettled([
      resolver.resolve4(hostname),
      resolver.resolve6(hostname),
    ]);
    const addresses = [v4, v6].flatMap((answer) =>
      answer.status === 'fulfilled' ? answer.value : [],
    );
    if (addresses.length > 0) return addresses;
    // Neither family: "no such name" only when both said so, else the resolver's failure.
    const failures = [v4, v6].map((answer) => (answer as PromiseRejectedResult).reason);
    throw failures.find((error) => !NO_SUCH_NAME.has(error?.code)) ?? failures[0];
  };
}

/**
 * Said after a refused address: what to do about it, so a developer trying a receiver on their
 * own machine does not have to read the server's source.
 */
export const PRIVATE_TARGETS_HINT =
  'this instance delivers to public addresses only (its operator can allow others with ' +
  'WEBHOOK_ALLOW_PRIVATE_TARGETS=true; for a receiver on a laptop, `tourops listen` forwards ' +
  'events to a local URL)';

export type UrlCheck = { ok: true; url: URL } | { ok: false; reason: string };

export const MAX_URL_LENGTH = 2048;

/** Resolver codes that mean "no such name", as opposed to a resolver that failed. */
const NO_SUCH_NAME = new Set(['ENOTFOUND', 'ENODATA', 'EAI_NONAME', 'EAI_NODATA']);

/**
 * ::/96, the deprecated IPv4-compatible IPv6 addresses: ipaddr.js calls them unicast, but some
 * stacks tunnel them to the embedded IPv4 address, so they are no public destination.
 */
const IPV4_COMPATIBLE = ipaddr.parseCIDR('::/96');

/**
 * Decides which addresses a webhook may reach: public unicast only, unless private targets are
 * allowed (development, tests). It checks URLs when an endpoint is registered, and its `lookup`
 * checks the addresses again when the connection is made, so a name that resolved to a public
 * address at registration and to a private one later (DNS rebinding) is still refused.
 */
export class AddressGuard {
  private readonly allowPrivate: boolean;
  private readonly resolver: Resolver;
  private readonly timeoutMs: number;

  /**
   * `timeoutMs` (WEBHOOK_DNS_TIMEOUT) bounds every resolution, by any resolver: a name that does
   * not resolve in time is refused at registration and fails the attempt at connect time.
   */
  constructor(options: { allowPrivate: boolean; timeoutMs?: number; resolver?: Resolver }) {
    this.allowPrivate = options.allowPrivate;
    this.timeoutMs = options.timeoutMs ?? 2_000;
    this.resolver = options.resolver ?? caresResolver({ timeoutMs: this.timeoutMs });
  }

  /** The host's addresses, or an error whose code is ETIMEOUT when no answer came in time. */
  private resolve(hostname: string): Promise<string[]> {
    return withDeadline(this.resolver(hostname), this.timeoutMs, () => {
      throw lookupError('ETIMEOUT', `${hostname} did not resolve in time`, hostname);
    });
  }

  /**
   * Public unicast only (ipaddr.js `range() === 'unicast'`, an IPv4-mapped IPv6 address judged as
   * its IPv4 address); anything unparsable is refused. With allowPrivate, every parsable address
   * is allowed.
   */
  isAllowedAddress(address: string): boolean {
    // net.isIP first: ipaddr.js also accepts forms like '127.1' that a socket would not take.
    if (isIP(address) === 0 || !ipaddr.isValid(address)) return false;
    if (this.allowPrivate) return true;
    let parsed = ipaddr.parse(address);
    if (parsed.kind() === 'ipv6') {
      const v6 = parsed as ipaddr.IPv6;
      if (v6.isIPv4MappedAddress()) parsed = v6.toIPv4Address();
      else if (v6.match(IPV4_COMPATIBLE)) return false;
    }
    return parsed.range() === 'unicast';
  }

  /**
   * Validates a destination URL: at most 2048 characters, a host whose every address is allowed,
   * and either https without credentials or a broker URL (see brokerTarget) on an encrypted
   * scheme, `amqps` or `tls`; plaintext `amqp` and `nats` only where private targets are allowed.
   * `reason` is fit for a 422 field error.
   */
  async checkUrl(url: string): Promise<UrlCheck> {
    if (url.length > MAX_URL_LENGTH) {
      return { ok: false, reason: `must be at most ${MAX_URL_LENGTH} characters` };
    }
    // The WHATWG parser drops tabs and newlines and reads `\` as `/`, where other parsers do
    // not: a URL they would read another host from is refused, not stored.
    if (hasUnsafeCharacter(url)) {
      return { ok: false, reason: 'must not contain spaces, control characters or backslashes' };
    }
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return { ok: false, reason: 'must be a valid URL' };
    }
    const broker = brokerScheme(parsed.protocol);
    if (broker !== undefined) {
      if (!broker.tls && !this.allowPrivate) {
        return {
          ok: false,
          reason: `must use amqps or tls (plaintext ${parsed.protocol.slice(0, -1)} is for development); ${PRIVATE_TARGETS_HINT}`,
        };
      }
      const target = brokerTarget(parsed);
      if (!target.ok) return target;
    } else if (parsed.protocol !== 'https:') {
      return { ok: false, reason: 'must use https (or a broker: amqps or tls)' };
    } else if (parsed.username !== '' || parsed.password !== '' || authorityOf(url).includes('@')) {
      return { ok: false, reason: 'must not contain credentials' };
    }

    const literal = literalAddress(parsed.hostname);
    if (literal !== null) {
      return this.isAllowedAddress(literal)
        ? { ok: true, url: parsed }
        : {
            ok: false,
            reason: `is a private or reserved address (${literal}); ${PRIVATE_TARGETS_HINT}`,
          };
    }

    let addresses: string[];
    try {
      addresses = await this.resolve(parsed.hostname);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      return {
        ok: false,
        reason:
          code !== undefined && NO_SUCH_NAME.has(code)
            ? 'host name does not resolve'
            : code === 'ETIMEOUT'
              ? `host name did not resolve within ${duration(this.timeoutMs)}`
              : 'host name could not be resolved',
      };
    }
    if (addresses.length === 0) return { ok: false, reason: 'host name does not resolve' };
    for (const address of addresses) {
      if (!this.isAllowedAddress(address)) {
        return {
          ok: false,
          reason: `resolves to a private or reserved address (${address}); ${PRIVATE_TARGETS_HINT}`,
        };
      }
    }
    return { ok: true, url: parsed };
  }

  /**
   * The address to connect to for `hostname` now (a literal host checked as it is), for clients
   * that take no `lookup` of their own (the broker senders); rejects with the codes `lookup`
   * reports (EADDRBLOCKED, ENOTFOUND, EAI_AGAIN).
   */
  addressFor(hostname: string): Promise<string> {
    const literal = literalAddress(hostname);
    if (literal !== null) {
      return this.isAllowedAddress(literal)
        ? Promise.resolve(literal)
        : Promise.reject(lookupError('EADDRBLOCKED', `${literal} is a blocked address`, hostname));
    }
    return new Promise((resolve, reject) => {
      this.lookup(hostname, {}, (error, address) => {
        if (error) reject(error);
        else resolve(address as string);
      });
    });
  }

  /**
   * A `lookup` for net/tls connect options: resolves with the guard's resolver and hands the
   * socket only the addresses allowed now, so the connection goes to an address checked at connect
   * time. Node does not call `lookup` for an IP literal host, so whoever connects must check
   * literal hosts with isAllowedAddress itself (WebhookSender does).
   */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    const family = familyNumber(options.family);
    this.resolve(hostname).then(
      (addresses) => {
        const candidates =
          family === 0 ? addresses : addresses.filter((address) => isIP(address) === family);
        if (candidates.length === 0) {
          callback(lookupError('ENOTFOUND', `${hostname} does not resolve`, hostname), '');
          return;
        }
        const allowed = candidates.filter((address) => this.isAllowedAddress(address));
        if (allowed.length === 0) {
          const message = `${hostname} resolves to a blocked address (${candidates.join(', ')})`;
          callback(lookupError('EADDRBLOCKED', message, hostname), '');
          return;
        }
        if (options.all) {
          callback(
            null,
            allowed.map((address) => ({ address, family: isIP(address) })),
          );
        } else {
          callback(null, allowed[0], isIP(allowed[0]));
        }
      },
      (error: NodeJS.ErrnoException) => {
        // As dns.lookup reports it: no such name, or a temporary failure (c-ares's own codes,
        // ECONNREFUSED among them, would read as the endpoint's).
        const code = NO_SUCH_NAME.has(error.code ?? '') ? 'ENOTFOUND' : 'EAI_AGAIN';
        callback(lookupError(code, error.message, hostname), '');
      },
    );
  };
}

/** The IP address a URL host names literally (IPv6 without its brackets), else null. */
export function literalAddress(hostname: string): string | null {
  const host =
    hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
  return isIP(host) === 0 ? null : host;
}

/** `2 s`, or `300 ms`: for messages. */
function duration(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}

function familyNumber(family: number | 'IPv4' | 'IPv6' | undefined): number {
  if (family === 'IPv4') return 4;
  if (family === 'IPv6') return 6;
  return family ?? 0;
}

function lookupError(code: string, message: string, hostname: string): NodeJS.ErrnoException {
  return Object.assign(new Error(message), { code, hostname });
}

/** The raw authority (`user@host:port`) of an absolute URL, as written. */
function authorityOf(url: string): string {
  const start = url.indexOf('//');
  return start < 0 ? '' : url.slice(start + 2).split(/[/?#]/, 1)[0];
}

/** Whitespace, a control character or a backslash: never part of a URL written as sent. */
function hasUnsafeCharacter(url: string): boolean {
  if (/[\s\\]/.test(url)) return true;
  for (let i = 0; i < url.length; i++) {
    const code = url.charCodeAt(i);
    if (code < 0x20 || code === 0x7f) return true;
  }
  return false;
}
