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

/**
 * Paths of every string (member names included) holding a NUL character. PostgreSQL cannot store
 * one in text, and SQLite would: both backends answer 422 instead. Only called when the raw text
 * has a `\u0000` escape (JSON text cannot hold a raw NUL), so ordinary bodies are never walked.
 */
function nulPaths(value: unknown, path: string[] = [], out: string[] = []): string[] {
  if (typeof value === 'string') {
    if (value.includes('\0')) out.push(path.length === 0 ? 'body' : path.join('.'));
  } else if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index++) {
      nulPaths(value[index], [...path, String(index)], out);
    }
  } else if (value !== null && typeof value === 'object') {
    for (const [name, member] of Object.entries(value)) {
      const memberPath = [...path, name.replace(/\0/g, '\\u0000')];
      if (name.includes('\0')) out.push(memberPath.join('.'));
      nulPaths(member, memberPath, out);
    }
  }
  return out;
}

export const NUL_MESSAGE = 'must not contain the NUL character (\\u0000)';

/** The 422 for a body with NUL characters, or null. */
export function nulProblem(text: string, value: unknown) {
  if (!text.includes('\\u0000')) return null;
  const paths = nulPaths(value);
  if (paths.length === 0) return null;
  const errors: FieldErrors = Object.create(null);
  for (const path of paths) errors[path] = [NUL_MESSAGE];
  return validationFailed(errors);
}

export const tooDeepProblem = () =>
  validationFailed(
    { body: [`must not nest more than ${MAX_JSON_DEPTH} levels`] },
    `The request body nests objects or arrays more than ${MAX_JSON_DEPTH} levels deep.`,
  );
