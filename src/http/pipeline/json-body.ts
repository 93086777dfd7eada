import { type FieldErrors, validationFailed } from '../../lib/problems.ts';

/** The largest request body accepted (413 is answered as 422 with this figure). */
export const BODY_LIMIT_BYTES = 262_144;

/** Deeper than any body of the API needs; bounds the recursion of everything that walks a body. */
const MAX_JSON_DEPTH = 32;

const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const MINUS = 0x2d;

/**
 * The nesting depth of JSON text, counted before it is parsed, so a body of 100,000 `[` never
 * reaches JSON.parse, the validator or the idempotency fingerprint (whose recursion would throw
 * a RangeError). Stops counting as soon as `limit` is passed.
 */
export function exceedsDepth(text: string, limit = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (inString) {
      if (code === BACKSLASH) i++;
      else if (code === QUOTE) inString = false;
    } else if (code === QUOTE) {
      inString = true;
    } else if (code === OPEN_BRACE || code === OPEN_BRACKET) {
      if (++depth > limit) return true;
    } else if (code === CLOSE_BRACE || code === CLOSE_BRACKET) {
      depth--;
    }
  }
  return false;
}

export const NUL_MESSAGE = 'must not contain the NUL character (\\u0000)';
const SURROGATE_MESSAGE =
  'must be valid Unicode: an unpaired surrogate (\\ud800-\\udfff) cannot be stored or sent as UTF-8';
const RANGE_MESSAGE =
  'is a number beyond the range of a double (about ±1.8e308): JSON cannot carry it back';
const PROTO_MESSAGE = 'is a member name the API never takes (it would reach an object prototype)';

/**
 * Escapes that can make a parsed value differ from what is stored, sent or shown: `\u0000` (no
 * NUL in PostgreSQL text), a surrogate escape (UTF-8 has no unpaired one), a three-digit
 * exponent (beyond the double range: JSON.parse gives Infinity, which JSON.stringify writes as
 * null); a 309-digit run is found by `hasLongDigitRun`. Ordinary bodies match none and are never
 * walked.
 */
const SUSPECT = /\\u0000|\\u[dD][89a-fA-F]|[eE]\+?0*[1-9]\d{2}/;

/** The fewest digits of an integer part beyond the double range. */
const OVERFLOW_DIGITS = 309;

/** Whether a run of OVERFLOW_DIGITS digits is in `text`: one pass, whatever the body holds. */
function hasLongDigitRun(text: string): boolean {
  let run = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code >= 0x30 && code <= 0x39) {
      if (++run >= OVERFLOW_DIGITS) return true;
    } else {
      run = 0;
    }
  }
  return false;
}

const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** A path as an error key (`body` for the whole); a NUL in a member name shown as its escape. */
const keyOf = (path: string[]) =>
  path.length === 0 ? 'body' : path.map((name) => name.replace(/\0/g, '\\u0000')).join('.');

/** Calls `visit` with every value of a parsed body, itself first, and its path of names. */
function eachValue(
  value: unknown,
  visit: (value: unknown, path: string[]) => void,
  path: string[] = [],
): void {
  visit(value, path);
  if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index++) {
      eachValue(value[index], visit, [...path, String(index)]);
    }
  } else if (value !== null && typeof value === 'object') {
    for (const [name, member] of Object.entries(value)) eachValue(member, visit, [...path, name]);
  }
}

/** Why a string (a value or a member name) cannot be kept as it is, or null. */
function stringFault(text: string): string | null {
  if (text.includes('\0')) return NUL_MESSAGE;
  return UNPAIRED_SURROGATE.test(text) ? SURROGATE_MESSAGE : null;
}

function valueFault(value: unknown): string | null {
  if (typeof value === 'string') return stringFault(value);
  return typeof value === 'number' && !Number.isFinite(value) ? RANGE_MESSAGE : null;
}

/**
 * The 422 for a parsed body holding a value the API could not keep as it was given (a NUL, an
 * unpaired surrogate, a number beyond the double range), naming each member; null when none.
 */
export function unkeptValuesProblem(text: string, value: unknown) {
  const lossy = LOSSY_SUSPECT.test(text);
  if (!lossy && !SUSPECT.test(text) && !hasLongDigitRun(text)) return null;
  const errors = unkeptValues(value);
  if (lossy) {
    for (const { path, kept } of lossyNumbers(text)) errors[keyOf(path)] ??= [lossyMessage(kept)];
  }
  return Object.keys(errors).length === 0 ? null : validationFailed(errors);
}

/**
 * What may hold a number a double cannot keep as written: 16 or more digits (a dot among them),
 * or an exponent. Ordinary bodies match neither and are never scanned.
 */
const LOSSY_SUSPECT = /\d[\d.]{15}|\d[eE][+-]?\d/;
const NUMBER = /-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

const lossyMessage = (kept: string) =>
  `is a number a double cannot hold as written: it would be kept and shown as ${kept}; send that, or fewer digits`;

/**
 * The numbers of valid JSON `text` whose double, written back as JSON writes it, is another
 * number (9007199254740993 kept as 9007199254740992, 1e-400 as 0), with their paths. A scan of
 * the text: a parsed body no longer has the digits it was sent with. Those beyond the double
 * range are `valueFault`'s.
 */
function lossyNumbers(text: string): Array<{ path: string[]; kept: string }> {
  const found: Array<{ path: string[]; kept: string }> = [];
  // The path to the value being read; an array's entry is its index, an object's its member.
  const path: string[] = [];
  const inArray: boolean[] = [];
  let keyNext = false;
  for (let i = 0; i < text.length; ) {
    const code = text.charCodeAt(i);
    if (code === QUOTE) {
      let end = i + 1;
      while (text.charCodeAt(end) !== QUOTE) end += text.charCodeAt(end) === BACKSLASH ? 2 : 1;
      if (keyNext) path[path.length - 1] = JSON.parse(text.slice(i, end + 1));
      keyNext = false;
      i = end + 1;
    } else if (code === OPEN_BRACE || code === OPEN_BRACKET) {
      inArray.push(code === OPEN_BRACKET);
      path.push('0');
      keyNext = code === OPEN_BRACE;
      i++;
    } else if (code === CLOSE_BRACE || code === CLOSE_BRACKET) {
      inArray.pop();
      path.pop();
      i++;
    } else if (code === COMMA) {
      if (inArray.at(-1)) path[path.length - 1] = String(Number(path.at(-1)) + 1);
      else keyNext = true;
      i++;
    } else if (code === MINUS || (code >= 0x30 && code <= 0x39)) {
      NUMBER.lastIndex = i;
      const token = (NUMBER.exec(text) as RegExpExecArray)[0];
      const value = Number(token);
      if (Number.isFinite(value) && decimal(token) !== decimal(String(value))) {
        found.push({ path: [...path], kept: JSON.stringify(value) });
      }
      i += token.length;
    } else {
      i++;
    }
  }
  return found;
}

/** A decimal number's value as one spelling (digits without leading or trailing zeros, exponent). */
function decimal(token: string): string {
  const [, sign, whole, fraction = '', exponent = '0'] =
    /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(token) as RegExpExecArray;
  const digits = `${whole}${fraction}`.replace(/^0+/, '');
  if (digits === '') return '0';
  const significant = digits.replace(/0+$/, '');
  const scale = Number(exponent) - fraction.length + (digits.length - significant.length);
  return `${sign}${significant}e${scale}`;
}

/**
 * The faults of `unkeptValuesProblem` in any value (a portal form, a body made from one), by
 * path: a member's name first, then its value.
 */
export function unkeptValues(value: unknown): FieldErrors {
  const errors: FieldErrors = Object.create(null);
  eachValue(value, (found, path) => {
    const name = path.at(-1);
    const fault = (name === undefined ? null : stringFault(name)) ?? valueFault(found);
    if (fault !== null) errors[keyOf(path)] ??= [fault];
  });
  return errors;
}

/**
 * The 422 for a body that the parser refused for a `__proto__` member (or `constructor.prototype`),
 * naming where it is: the body is valid JSON, only that member is refused. Null when the text
 * holds none (the parser refused it for another reason).
 */
export function prototypeMemberProblem(text: string) {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  const errors: FieldErrors = Object.create(null);
  eachValue(value, (_found, path) => {
    const name = path.at(-1);
    if (name === '__proto__' || (name === 'prototype' && path.at(-2) === 'constructor')) {
      errors[keyOf(path)] = [PROTO_MESSAGE];
    }
  });
  return Object.keys(errors).length === 0 ? null : validationFailed(errors);
}

export const tooDeepProblem = () =>
  validationFailed(
    { body: [`must not nest more than ${MAX_JSON_DEPTH} levels`] },
    `The request body nests objects or arrays more than ${MAX_JSON_DEPTH} levels deep.`,
  );
