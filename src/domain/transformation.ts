import { MAX_URL_LENGTH } from './address-guard.ts';
import { headerFault } from './receiver-auth.ts';

/**
 * A subscription's transformation: JavaScript defining `handler(webhook)`, run in a sandbox
 * (src/transformations) before each attempt. It is given the webhook as it would go and returns
 * it changed: another body (`payload`), extra headers, another HTTPS `url`, or `cancel: true` (no
 * request; the attempt succeeds without a send). What it returns is checked here, on the host's
 * side, whatever the code did inside the sandbox.
 */

/** The bounds of a transformation and of one run of it. */
export const TRANSFORMATION_LIMITS = Object.freeze({
  /** The code, as UTF-8. */
  codeBytes: 64 * 1024,
  /** One run's CPU time on the sandbox's thread (a check's compile and top level too). */
  runMs: 100,
  /** One code version's heap inside the sandbox. */
  memoryBytes: 16 * 1024 * 1024,
  /** The sandbox's call stack: deep recursion ends here, not in the host. */
  stackBytes: 256 * 1024,
  /** What a run may return, as JSON (the body sent is within it). */
  resultBytes: 1024 * 1024,
  /** Extra headers a run may add. */
  headers: 10,
  /** A run's error message as the attempt log keeps it. */
  messageChars: 300,
});

/** The error class of an attempt whose transformation failed (threw, ran out, returned a fault). */
export const TRANSFORMATION_FAILED = 'transformation_failed';

/** What a handler is given. */
export interface TransformationInput {
  type: string;
  /** The body that would be sent, parsed. */
  payload: unknown;
  /** The destination, as stored (a broker's password masked). */
  url: string;
  /** Extra headers so far: none, the run adds its own. */
  headers: Record<string, string>;
}

/** What a run comes to, once checked: what to send instead, or nothing. */
export interface TransformationResult {
  payload: unknown;
  url: string;
  headers: Record<string, string>;
  cancel: boolean;
}

export type TransformationOutcome =
  | { ok: true; result: TransformationResult }
  | { ok: false; error: string };

/** A subscription's transformation as stored and shown: `{code}`. */
export interface Transformation {
  code: string;
}

/** Why code cannot be a transformation before it is compiled (its size), or null. */
export function codeFault(code: string): string | null {
  const bytes = Buffer.byteLength(code, 'utf8');
  if (bytes > TRANSFORMATION_LIMITS.codeBytes) {
    return `is ${bytes} bytes; at most ${TRANSFORMATION_LIMITS.codeBytes}`;
  }
  if (code.trim() === '') return 'must define function handler(webhook)';
  return null;
}

/** A message from the sandbox as the attempt log and the API show it: one line, bounded. */
export function boundedMessage(message: string): string {
  const line = message.replace(/\s+/g, ' ').trim();
  const max = TRANSFORMATION_LIMITS.messageChars;
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** What the checks of a result need to know of where the delivery goes. */
export interface Destination {
  /** An HTTPS endpoint (only those may be moved, and only to another HTTPS URL). */
  https: boolean;
  /** The subscription sends `Authorization` itself (`auth`). */
  withAuth: boolean;
  /** The origin its receiver authentication (headers, auth, certificate) is for; null for none. */
  secretsOrigin: string | null;
}

/**
 * The checked form of what a handler returned (`returned`: parsed from the JSON the sandbox
 * wrote), given what it was handed and where it goes. A new URL is checked here by the rules of
 * a subscription's, and by the sender's address guard when it connects, as the subscription's is.
 */
export function checkedResult(
  returned: unknown,
  input: Pick<TransformationInput, 'type' | 'url'>,
  destination: Destination,
): TransformationOutcome {
  const fail = (error: string): TransformationOutcome => ({ ok: false, error });
  if (!isObject(returned)) {
    return fail('handler must return the webhook object ({type, payload, url, headers})');
  }
  for (const name of Object.keys(returned)) {
    if (!['type', 'payload', 'url', 'headers', 'cancel'].includes(name)) {
      return fail(`handler returned an unknown member "${boundedMessage(name).slice(0, 40)}"`);
    }
  }
  const { type, payload, url, headers, cancel } = returned;
  if (cancel !== undefined && typeof cancel !== 'boolean') return fail('cancel must be a boolean');
  if (type !== undefined && type !== input.type) {
    return fail(`type is the event's (${input.type}) and cannot change`);
  }
  if (payload === undefined && cancel !== true) return fail('handler returned no payload');
  let target = input.url;
  if (url !== undefined && url !== input.url) {
    const fault = urlFault(url, destination.https);
    if (fault !== null) return fail(fault);
    const origin = new URL(url as string).origin;
    if (destination.secretsOrigin !== null && origin !== destination.secretsOrigin) {
      return fail(
        "url is on another origin than the subscription's: its receiver authentication goes to its own origin only",
      );
    }
    target = url as string;
  }
  const extra: Record<string, string> = {};
  if (headers !== undefined) {
    if (!isObject(headers)) return fail('headers must be an object of strings');
    const names = Object.keys(headers);
    if (names.length > TRANSFORMATION_LIMITS.headers) {
      return fail(`headers has ${names.length} names; at most ${TRANSFORMATION_LIMITS.headers}`);
    }
    const seen = new Set<string>();
    for (const name of names) {
      const value = headers[name];
      const shown = `header ${boundedMessage(name).slice(0, 100)}`;
      if (typeof value !== 'string') return fail(`${shown} must be a string`);
      const fault = headerFault(name, value, destination.withAuth);
      if (fault !== null) return fail(`${shown} ${fault}`);
      if (seen.has(name.toLowerCase())) return fail(`${shown} is given twice`);
      seen.add(name.toLowerCase());
      extra[name.toLowerCase()] = value;
    }
  }
  return {
    ok: true,
    result: { payload: payload ?? null, url: target, headers: extra, cancel: cancel === true },
  };
}

/** Why a returned URL cannot be sent to, or null (the address guard checks it when sending). */
function urlFault(url: unknown, https: boolean): string | null {
  if (!https) return "a broker destination's url cannot be changed by a transformation";
  if (typeof url !== 'string') return 'url must be a string';
  if (url.length > MAX_URL_LENGTH) return `url must be at most ${MAX_URL_LENGTH} characters`;
  if (!URL.canParse(url)) return 'url must be a valid https URL';
  const parsed = new URL(url);
  if (parsed.protocol !== 'https:') return 'url must use https';
  if (parsed.username !== '' || parsed.password !== '') {
    return 'url must not carry credentials (set headers or the subscription auth)';
  }
  return null;
}

/**
 * What a handler is given, as the sandbox takes it (JSON): `body`, the JSON text of the body the
 * subscription would get, is spliced in whole rather than parsed and written again.
 */
export function transformationInputText(input: {
  type: string;
  url: string;
  body: string;
}): string {
  return `{"type":${JSON.stringify(input.type)},"payload":${input.body},"url":${JSON.stringify(input.url)},"headers":{}}`;
}

/** The body a result sends: its payload as JSON, exactly as signed. */
export function transformedBody(result: TransformationResult): string {
  return JSON.stringify(result.payload);
}
