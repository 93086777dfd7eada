import type { TSchema } from '@sinclair/typebox';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { type FieldErrors, validationFailed } from '../../lib/problems.ts';
import { unkeptValues } from '../pipeline/json-body.ts';
import { lazyValidator } from '../pipeline/lazy-compile.ts';
import { toProblem } from '../pipeline/problem-reply.ts';

/**
 * Portal forms, judged by the API's own body schemas and as strictly: a form becomes the JSON body
 * the API would take, then that body's schema decides, with the API's messages. Text becomes a
 * number only when it is digits (`1e3` stays text and fails `integer`), a boolean only from `true`
 * or `false` (`maybe` fails `boolean`), an instant only when it names a real minute
 * (`2026-02-31T00:00` stays text and fails `date-time`); any other field goes in as sent, so an
 * unknown one is refused as an unknown member is. One 422 names every field at fault, before
 * anything changes.
 */

export type Form = Record<string, string | string[] | undefined>;

/** What every form carries beside its own fields (portal.ts and layout.ts). */
const FRAME_FIELDS = new Set(['_csrf', 'idempotencyKey']);

/** A body member read from the form; undefined leaves the member out. */
export type Reader = (form: Form) => unknown;

/** A field a reader cannot make a value of (text that is not JSON): named in the form's 422. */
export class FieldFault extends Error {}

const ajv = addFormats.default(new Ajv.default({ allErrors: true, strict: false }));

/**
 * A body schema of the API, for `bodyOf`, compiled when it first judges a form (lazyValidator):
 * most processes that build the app (an API node behind a balancer, a test) never serve a form.
 */
export const formSchema = (schema: TSchema) => lazyValidator(() => ajv.compile(schema));

/** Readers of a form's fields, by the JSON type the API's schema expects. */
export const field = {
  /** Text as sent (a field sent twice stays a list, which a string member refuses). */
  text:
    (name: string): Reader =>
    (form) =>
      form[name],
  /** Checkboxes of one name: every value checked, none an empty list. */
  list:
    (name: string): Reader =>
    (form) =>
      [form[name] ?? []].flat(),
  /** An integer from digits; empty is `emptyIs` (left out by default). */
  integer:
    (name: string, emptyIs?: null): Reader =>
    (form) => {
      const value = form[name];
      if (value === undefined || value === '') return emptyIs;
      return typeof value === 'string' && /^-?\d{1,15}$/.test(value) ? Number(value) : value;
    },
  /** JSON text (a filter); empty is null, text that is no JSON is refused with the parser's words. */
  json:
    (name: string): Reader =>
    (form) => {
      const value = form[name];
      if (typeof value !== 'string') return value;
      if (value.trim() === '') return null;
      try {
        return JSON.parse(value);
      } catch (error) {
        throw new FieldFault(`is not JSON: ${(error as Error).message}`);
      }
    },
  /** Source code, its line ends as LF (a browser sends a textarea's as CRLF). */
  script:
    (name: string): Reader =>
    (form) => {
      const value = form[name];
      return typeof value === 'string' ? value.replace(/\r\n?/g, '\n') : value;
    },
  /** A transformation's JavaScript: empty is none (null), else `{code}` (see `script`). */
  code:
    (name: string): Reader =>
    (form) => {
      const value = field.script(name)(form);
      if (typeof value !== 'string') return value;
      return value.trim() === '' ? null : { code: value };
    },
  /** Durations apart by commas or spaces (`30s, 5m`), as a list; empty is null. */
  durations:
    (name: string): Reader =>
    (form) => {
      const value = form[name];
      if (typeof value !== 'string') return value;
      const list = value.split(/[\s,]+/).filter((part) => part !== '');
      return list.length === 0 ? null : list;
    },
  /** A checkbox of value `true`: unchecked (absent) is false. */
  checkbox:
    (name: string): Reader =>
    (form) => {
      const value = form[name];
      if (value === undefined) return false;
      return value === 'true' ? true : value === 'false' ? false : value;
    },
  /**
   * A `datetime-local` value read in the browser's zone (`offsetName`: its getTimezoneOffset, in
   * minutes), as an RFC 3339 instant; as sent when it names no real minute.
   */
  instant:
    (name: string, offsetName: string): Reader =>
    (form) => {
      const local = form[name];
      if (typeof local !== 'string') return local;
      const offset = form[offsetName] ?? '0';
      const at = localInstant(local, typeof offset === 'string' ? offset : '');
      return at ?? local;
    },
};

/**
 * The JSON body of a form: each reader's member, the `fixed` members the form's action implies
 * (a pause is `active: false`), and every other field as sent (frame fields and `also`, fields a
 * reader consumed besides its own such as a time zone offset, aside). A field named like a fixed
 * member is no field of the form. Throws the API's 422 naming every field at fault.
 */
export function bodyOf<T>(
  validate: ReturnType<typeof formSchema>,
  form: Form,
  readers: Record<string, Reader>,
  options: { fixed?: Record<string, unknown>; also?: readonly string[] } = {},
): T {
  const fixed = options.fixed ?? {};
  const body: Record<string, unknown> = {};
  const errors: FieldErrors = {};
  for (const [name, value] of Object.entries(form)) {
    if (FRAME_FIELDS.has(name) || options.also?.includes(name) || Object.hasOwn(readers, name)) {
      continue;
    }
    if (Object.hasOwn(fixed, name)) errors[name] = ['is not an allowed member'];
    else own(body, name, value);
  }
  for (const [name, read] of Object.entries(readers)) {
    try {
      const value = read(form);
      if (value !== undefined) body[name] = value;
    } catch (error) {
      if (!(error instanceof FieldFault)) throw error;
      errors[name] = [error.message];
    }
  }
  Object.assign(body, fixed);
  // What the API's JSON parser refuses (a number past the double range in a filter, a NUL).
  for (const [path, messages] of Object.entries(unkeptValues(body))) errors[path] ??= messages;
  if (validate(body) && Object.keys(errors).length === 0) return body as T;
  const problem = toProblem(
    Object.assign(new Error('invalid form'), { validation: validate.errors ?? [] }),
  );
  const schemaErrors = problem?.extra.errors as FieldErrors | undefined;
  throw validationFailed({ ...schemaErrors, ...errors });
}

/**
 * Sets `name` as an own member whatever it is: assigned, `__proto__` would set the body's prototype
 * instead and slip past the schema's check for unknown members.
 */
function own(body: Record<string, unknown>, name: string, value: unknown): void {
  Object.defineProperty(body, name, {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  });
}

/** `YYYY-MM-DDTHH:MM[:SS]` at `offsetMinutes` from UTC as an ISO instant; null if no such time. */
function localInstant(local: string, offsetMinutes: string): string | null {
  const match = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?$/.exec(local);
  if (!match || !/^-?\d{1,4}$/.test(offsetMinutes)) return null;
  const offset = Number(offsetMinutes);
  if (Math.abs(offset) > 24 * 60) return null;
  const [y, mo, d, h, mi, s] = match.slice(1).map((part) => Number(part ?? 0));
  const wall = new Date(Date.UTC(y, mo - 1, d, h, mi, s));
  // Date.UTC rolls 31 February over into March: a time that does not exist is refused instead.
  const exists =
    wall.getUTCFullYear() === y &&
    wall.getUTCMonth() === mo - 1 &&
    wall.getUTCDate() === d &&
    wall.getUTCHours() === h &&
    wall.getUTCMinutes() === mi &&
    wall.getUTCSeconds() === s;
  return exists ? new Date(wall.getTime() + offset * 60_000).toISOString() : null;
}
