import { availableParallelism } from 'node:os';
import ipaddr from 'ipaddr.js';
import { isScope, SCOPES } from '../domain/plans.ts';
import { isOneOf, SUBSCRIBABLE_EVENT_TYPES, type SubscribableEventType } from '../domain/states.ts';
import {
  TENANT_NAME_MAX_LENGTH,
  TENANT_SLUG_PATTERN,
  TENANT_SLUG_RULE,
} from '../domain/tenants.ts';
import { PAYLOAD_FORMS, type PayloadForm } from '../domain/thin-payload.ts';
import { UsageError } from './args.ts';

/**
 * Option values the CLI checks itself, so a typo is a usage error (exit 2) naming the option
 * rather than a problem from deep in a service.
 */

export function checkTenantName(name: string, command: string): string {
  if (name.trim() === '' || name.length > TENANT_NAME_MAX_LENGTH) {
    throw new UsageError(`--name must be 1 to ${TENANT_NAME_MAX_LENGTH} characters`, command);
  }
  return name;
}

export function checkSlug(slug: string, command: string): string {
  if (!TENANT_SLUG_PATTERN.test(slug)) {
    throw new UsageError(`--slug "${slug}" must be ${TENANT_SLUG_RULE}`, command);
  }
  return slug;
}

/** `trips:read,clients:read` or `all`; `['*']` is how the tokens service spells every scope. */
export function parseScopes(raw: string, command: string): string[] {
  const items = raw
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
  if (items.length === 0)
    throw new UsageError('--scopes needs at least one scope, or all', command);
  if (items.includes('all') || items.includes('*')) return ['*'];
  const unknown = items.filter((item) => !isScope(item));
  if (unknown.length > 0) {
    throw new UsageError(
      `--scopes: unknown scope ${unknown.map((item) => `"${item}"`).join(', ')}; use all or some of ${SCOPES.join(', ')}`,
      command,
    );
  }
  return [...new Set(items)];
}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(Z|[+-](\d{2}):(\d{2}))$/i;

/**
 * An ISO 8601 date (midnight UTC at the start of that day) or a date-time with `Z` or an
 * offset; a bare local time is refused because the machine's time zone would silently decide.
 * Returns the instant as an ISO string, which must lie in the future.
 */
export function parseExpiry(raw: string, now: Date, command: string): string {
  const invalid = () =>
    new UsageError(
      `--expires "${raw}" is not an ISO date (2027-12-31) or date-time with a time zone (2027-12-31T18:00:00Z)`,
      command,
    );
  let iso: string;
  const date = DATE.exec(raw);
  const dateTime = DATE_TIME.exec(raw);
  if (date) {
    if (!isCalendarDate(date[1], date[2], date[3])) throw invalid();
    iso = `${raw}T00:00:00.000Z`;
  } else if (dateTime) {
    const [
      ,
      year,
      month,
      day,
      hour,
      minute,
      second = '00',
      zone,
      zoneHour = '00',
      zoneMinute = '00',
    ] = dateTime;
    const inRange = Number(hour) <= 23 && Number(minute) <= 59 && Number(second) <= 59;
    const zoneInRange =
      zone.toUpperCase() === 'Z' || (Number(zoneHour) <= 23 && Number(zoneMinute) <= 59);
    if (!isCalendarDate(year, month, day) || !inRange || !zoneInRange) throw invalid();
    iso = new Date(raw).toISOString();
  } else if (/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(raw)) {
    throw new UsageError(
      `--expires "${raw}" needs a time zone, e.g. ${raw}Z (UTC) or ${raw}+02:00`,
      command,
    );
  } else {
    throw invalid();
  }
  if (Date.parse(iso) <= now.getTime()) {
    throw new UsageError(`--expires ${iso} is not in the future`, command);
  }
  return iso;
}

function isCalendarDate(year: string, month: string, day: string): boolean {
  const date = new Date(Date.UTC(Number(year), Number(month) - 1, Number(day)));
  return (
    date.getUTCFullYear() === Number(year) &&
    date.getUTCMonth() === Number(month) - 1 &&
    date.getUTCDate() === Number(day)
  );
}

/** Most API processes `serve --processes` starts. */
const MAX_PROCESSES = 64;

/** `--processes`: a count from 1 to 64, or `auto` for one per core; absent, 1. */
export function parseProcesses(raw: string | undefined): number {
  if (raw === undefined) return 1;
  if (raw === 'auto') return availableParallelism();
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > MAX_PROCESSES) {
    throw new UsageError(
      `--processes "${raw}" must be a number from 1 to ${MAX_PROCESSES}, or auto`,
      'serve',
    );
  }
  return Number(raw);
}

/** `booking.confirmed,client.created`: subscribable event types, every one known. */
export function parseEventTypes(raw: string, command: string): SubscribableEventType[] {
  const items = raw
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
  const known = new Set<string>(SUBSCRIBABLE_EVENT_TYPES);
  const unknown = items.filter((item) => !known.has(item));
  if (items.length === 0 || unknown.length > 0) {
    throw new UsageError(
      `--events: ${items.length === 0 ? 'needs at least one event type' : `unknown ${unknown.join(', ')}`}; ` +
        `one or more of ${SUBSCRIBABLE_EVENT_TYPES.join(', ')}`,
      command,
    );
  }
  return items as SubscribableEventType[];
}

/**
 * An http(s) URL on this machine: `localhost` or a loopback address. Events of a real tenant go
 * nowhere else from an operator's terminal.
 */
export function parseLoopbackUrl(raw: string, option: string, command: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(
      `--${option} "${raw}" is not a URL (e.g. http://localhost:4242/webhooks)`,
      command,
    );
  }
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const loopback =
    host === 'localhost' ||
    host.endsWith('.localhost') ||
    (ipaddr.isValid(host) && ipaddr.process(host).range() === 'loopback');
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || !loopback) {
    throw new UsageError(
      `--${option} must be an http(s) URL on this machine (localhost, 127.0.0.1 or [::1]), not "${raw}"`,
      command,
    );
  }
  return url;
}

/** `--payload`: `full` or `thin` (see domain/thin-payload.ts); absent, `full`. */
export function parsePayloadForm(raw: string | undefined, command: string): PayloadForm {
  if (raw === undefined) return 'full';
  if (!isOneOf(PAYLOAD_FORMS, raw)) {
    throw new UsageError(`--payload "${raw}" must be one of ${PAYLOAD_FORMS.join(', ')}`, command);
  }
  return raw;
}

/** `whsec_` and 32 to 100 URL-safe characters, like the keys the API issues. */
export function checkSigningKey(raw: string, command: string): string {
  if (!/^whsec_[A-Za-z0-9_-]{32,100}$/.test(raw)) {
    throw new UsageError(
      '--signing-key must be whsec_ followed by 32 to 100 of A-Z a-z 0-9 _ -',
      command,
    );
  }
  return raw;
}

/**
 * A header and rows as aligned columns: each as wide as its widest cell, two spaces apart, no
 * trailing spaces; one line each.
 */
export function columns(header: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((row) => (row[i] ?? '').length)));
  return all
    .map(
      (row) =>
        `${row
          .map((cell, i) => cell.padEnd(widths[i]))
          .join('  ')
          .trimEnd()}\n`,
    )
    .join('');
}
