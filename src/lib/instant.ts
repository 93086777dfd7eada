import { fieldError } from './problems.ts';

// RFC 3339 date-time, as the `date-time` format accepts it (`t`/`z` in any case, any fraction).
const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

const LATEST = '9999-12-31T23:59:59.999Z';

/**
 * A date-time bound as the canonical text timestamps are stored in (`toISOString()`, UTC,
 * milliseconds), so the database compares instants, not spellings: `…T10:00:00+02:00`,
 * `…t08:00:00z` and `…T08:00:00.000Z` are one instant. A fraction finer than a millisecond is
 * cut, never rounded up, so a `gte` bound can only include a row it might have missed.
 */
export function canonicalInstant(field: string, value: string): string {
  const match = DATE_TIME.exec(value);
  const invalid = () =>
    fieldError(field, 'must be a date-time (RFC 3339, e.g. 2026-05-01T08:00:00Z)');
  if (!match) throw invalid();
  const [, year, month, day, hour, minute, second, fraction = '', zulu, sign, offH, offM] = match;
  const millis = Number(fraction.slice(0, 3).padEnd(3, '0'));
  const utc = new Date(0);
  // Not Date.UTC, which reads the years 0-99 as 1900-1999.
  utc.setUTCFullYear(+year, +month - 1, +day);
  utc.setUTCHours(+hour, +minute, +second, millis);
  const local = utc.getTime();
  const offsetMinutes = zulu ? 0 : (sign === '-' ? -1 : 1) * (+offH * 60 + +offM);
  const instant = new Date(local - offsetMinutes * 60_000);
  // Dates roll 2026-02-30 over into March: such a date names no instant.
  if (
    Number.isNaN(instant.getTime()) ||
    +month < 1 ||
    +month > 12 ||
    +day > daysInMonth(+year, +month) ||
    +hour > 23 ||
    +minute > 59 ||
    +second > 60 ||
    +offH > 23 ||
    +offM > 59 ||
    +day < 1
  ) {
    throw invalid();
  }
  // Past year 9999 toISOString() writes `+010000-…`, which sorts before every stored time.
  return instant.getUTCFullYear() > 9999 ? LATEST : instant.toISOString();
}

function daysInMonth(year: number, month: number): number {
  const date = new Date(0);
  date.setUTCFullYear(year, month, 0);
  return date.getUTCDate();
}
