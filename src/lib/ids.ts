import { randomBytes, randomFillSync, randomUUID } from 'node:crypto';
import { encodeTime, monotonicFactory } from 'ulid';

export type IdPrefix =
  | 'ntf'
  | 'wkr'
  | 'ten'
  | 'mem'
  | 'tok'
  | 'trp'
  | 'bkg'
  | 'cli'
  | 'pay'
  | 'whs'
  | 'dlv'
  | 'att'
  | 'cty'
  | 'htl'
  | 'act'
  | 'veh'
  | 'gde'
  | 'pts'
  | 'era';

/**
 * ulid's own generator asks the system for one random byte per character, 16 calls per id (a
 * visible share of an insert's CPU in a profile); this one hands out bytes of one 4 KB fill at a
 * time.
 */
const randomPool = new Uint8Array(4096);
let randomAt = randomPool.length;
function pooledRandom(): number {
  if (randomAt === randomPool.length) {
    randomFillSync(randomPool);
    randomAt = 0;
  }
  return randomPool[randomAt++] / 256;
}

// Monotonic within a millisecond, so ids from one process sort exactly in creation order.
const nextUlid = monotonicFactory(pooledRandom);

/** Opaque, prefixed, time-ordered identifier, e.g. `trp_01JD3X…`. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${nextUlid()}`;
}

/**
 * The smallest id of `prefix` minted at `ms` or later: ids sort by creation time, so a range of
 * ids from it is a time range that an index on the id answers.
 */
export function firstIdAt(prefix: IdPrefix, ms: number): string {
  return `${prefix}_${encodeTime(ms, 10)}${'0'.repeat(16)}`;
}

export function newEventId(): string {
  return randomUUID();
}

/** Crockford base32: no I, L, O, U, so codes read aloud and typed by hand stay unambiguous. */
export const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

export function randomCrockford(length: number): string {
  const bytes = randomBytes(length);
  let out = '';
  for (let i = 0; i < length; i++) out += CROCKFORD[bytes[i] & 31];
  return out;
}

/** Human reference such as `TR-7KX2M9`; uniqueness per tenant is enforced by the database. */
function humanCode(prefix: 'TR' | 'BK'): string {
  return `${prefix}-${randomCrockford(6)}`;
}

/**
 * A human code not yet taken. 32^6 codes per tenant make a clash rare; checking first keeps the
 * insert (and its transaction) from failing on the unique index.
 */
export async function uniqueHumanCode(
  prefix: 'TR' | 'BK',
  isTaken: (code: string) => Promise<boolean>,
): Promise<string> {
  for (;;) {
    const code = humanCode(prefix);
    if (!(await isTaken(code))) return code;
  }
}
