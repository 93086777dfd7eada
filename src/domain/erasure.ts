import { credentialForms, SECRET_MASK } from './redaction.ts';

/**
 * A person's erasure (GDPR article 17): what is redacted, to what, and in which stores. The
 * policy is here; the batches that apply it are the erasure service's.
 */

export const ERASURE_STATUSES = ['pending', 'running', 'done'] as const;
export type ErasureStatus = (typeof ERASURE_STATUSES)[number];

/** What the operator named: one client, one booking, or an e-mail address. */
const ERASURE_SUBJECT_KINDS = ['clientId', 'bookingId', 'email'] as const;
export type ErasureSubjectKind = (typeof ERASURE_SUBJECT_KINDS)[number];

/**
 * The runner's stages, in order: the stored event bodies (and the attempt logs of their
 * deliveries), then the idempotency store's saved answers, then, in one transaction, what was
 * written meanwhile, the live rows, and the announcement.
 */
const ERASURE_STAGES = ['events', 'idempotency', 'finish'] as const;
export type ErasureStage = (typeof ERASURE_STAGES)[number];

/** The stores an erasure reaches, as its record's `redacted` counts name them. */
export const ERASURE_STORES = [
  'clients',
  'bookings',
  'events',
  'webhookAttempts',
  'idempotencyKeys',
] as const;
type ErasureStore = (typeof ERASURE_STORES)[number];
export type ErasureCounts = Record<ErasureStore, number>;

export const noCounts = (): ErasureCounts =>
  Object.fromEntries(ERASURE_STORES.map((store) => [store, 0])) as ErasureCounts;

/** A client's personal members, as an erasure leaves them. */
export const ERASED_CLIENT = {
  email: null,
  phone: null,
  legalName: null,
  vatId: null,
  notes: null,
  tags: [] as string[],
  displayName: 'Erased client',
} as const;

/** A booking's traveller, as an erasure leaves it. */
export const ERASED_BOOKING = { travelerName: null, travelerEmail: null } as const;

/** The ids an erasure reaches. */
export interface ErasureTarget {
  clientIds: ReadonlySet<string>;
  bookingIds: ReadonlySet<string>;
}

type Json = Record<string, unknown>;

/** The placeholders for the resource an event of `type` is about, when the target names it. */
function placeholdersFor(type: string, data: Json, target: ErasureTarget): Json | null {
  const family = type.slice(0, type.indexOf('.'));
  if (family === 'client' && target.clientIds.has(data.clientId as string)) return ERASED_CLIENT;
  if (
    (family === 'booking' || family === 'dispute') &&
    target.bookingIds.has(data.bookingId as string)
  ) {
    return ERASED_BOOKING;
  }
  return null;
}

/**
 * An event's data with the target's personal members replaced: in `data` itself (a client
 * event's `displayName`), in `object`, and on both sides of `changes`; with the values it
 * removed, for the attempt logs that may echo them. Null when the event is not about the target.
 */
export function eraseEventData(
  type: string,
  data: Json,
  target: ErasureTarget,
): { data: Json; removed: string[] } | null {
  const members = placeholdersFor(type, data, target);
  if (members === null) return null;
  const removed: string[] = [];
  const replace = (holder: Json) => {
    for (const [name, placeholder] of Object.entries(members)) {
      if (!(name in holder)) continue;
      collect(holder[name], removed);
      holder[name] = placeholder;
    }
  };
  const out = structuredClone(data);
  replace(out);
  if (isObject(out.object)) replace(out.object);
  if (isObject(out.changes)) {
    for (const name of Object.keys(members)) {
      const change = out.changes[name];
      if (!isObject(change)) continue;
      collect(change.before, removed);
      collect(change.after, removed);
      const placeholder = (members as Json)[name];
      out.changes[name] = { before: placeholder, after: placeholder };
    }
  }
  return { data: out, removed };
}

/** A saved API answer (`{data: <client or booking>}`) with the target's members replaced. */
export function eraseAnswer(body: string, target: ErasureTarget): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return body;
  }
  if (!isObject(parsed) || !isObject(parsed.data)) return body;
  const resource = parsed.data;
  const id = resource.id as string;
  const members = target.clientIds.has(id)
    ? ERASED_CLIENT
    : target.bookingIds.has(id)
      ? ERASED_BOOKING
      : null;
  if (members === null) return body;
  let changed = false;
  for (const [name, placeholder] of Object.entries(members)) {
    if (name in resource) {
      resource[name] = placeholder;
      changed = true;
    }
  }
  return changed ? JSON.stringify(parsed) : body;
}

/** Values shorter than this are not searched for in free text: they would match anything. */
const SHORTEST_NEEDLE = 4;

/**
 * Every form in which a removed value may come back in free text (a receiver's echo, a saved
 * answer): those the redaction of credentials searches for, and JSON with non-ASCII escaped as
 * `\uXXXX` (what Python's `json.dumps` writes by default). Longest first, for `redacted`.
 */
export function needleForms(values: Iterable<string>): string[] {
  const kept = [...new Set(values)].filter((value) => value.length >= SHORTEST_NEEDLE);
  const forms = new Set(credentialForms(kept));
  for (const value of kept) forms.add(asciiJson(value));
  return [...forms].sort((a, b) => b.length - a.length);
}

/** What free text shows where a removed value was. */
export const ERASED_TEXT = SECRET_MASK;

function asciiJson(value: string): string {
  return JSON.stringify(value)
    .slice(1, -1)
    .replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function collect(value: unknown, into: string[]): void {
  if (typeof value === 'string') into.push(value);
  else if (Array.isArray(value)) for (const item of value) collect(item, into);
}

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
