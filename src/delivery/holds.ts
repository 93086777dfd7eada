import type { Database } from '../db/database.ts';
import { prepare } from '../db/prepared.ts';
import { BoundedMap } from '../lib/bounded-map.ts';
import type { Clock } from '../lib/clock.ts';

/**
 * How stale a stored hold read may be: a start within this of the read trusts it. With the
 * recorder writing a hold at once, a start follows another process's 429 by at most this plus
 * the recording's commit: inside the 100 ms promise.
 */
export const STORED_HOLD_READ_MS = 40;

/** Reads a subscription's stored hold (`held_until`, ISO 8601), or null. */
export type StoredHoldRead = (subscriptionId: string) => Promise<string | null>;

/** The stored hold read from `database`, compiled once (it runs before a start). */
export function storedHoldRead(database: Pick<Database, 'db'>): StoredHoldRead {
  const { db } = database;
  const read = prepare(db, (id: string) =>
    db.selectFrom('webhookSubscriptions').select('heldUntil').where('id', '=', id),
  );
  return async (id) => (await read(id))[0]?.heldUntil ?? null;
}

/**
 * The holds receivers asked for (a 429 or 503 with `Retry-After`), per subscription, as this
 * process knows them: its own answers at once, other processes' as their notices arrive, and,
 * for a worker no notice reaches, as the database stores them (`readStored` at a start: each
 * subscription read at most once per STORED_HOLD_READ_MS, concurrent starts sharing the read; a
 * failed read is no hold, the attempt goes as without the check).
 */
export class Holds {
  private readonly until = new Map<string, number>();
  private readonly reads = new BoundedMap<string, { atMs: number; until: Promise<number | null> }>(
    10_000,
  );

  constructor(private readonly read: StoredHoldRead) {}

  /** Holds the subscription until `untilMs`, unless held longer already. */
  hold(subscriptionId: string, untilMs: number): void {
    if ((this.until.get(subscriptionId) ?? 0) < untilMs) this.until.set(subscriptionId, untilMs);
  }

  /** Until when the subscription is held (epoch ms), or null when it is not at `nowMs`. */
  heldUntil(subscriptionId: string, nowMs: number): number | null {
    const until = this.until.get(subscriptionId);
    if (until === undefined) return null;
    if (until > nowMs) return until;
    this.until.delete(subscriptionId);
    return null;
  }

  /** The subscriptions held at `nowMs` (the claim leaves them out). */
  held(nowMs: number): string[] {
    const held: string[] = [];
    for (const id of this.until.keys()) if (this.heldUntil(id, nowMs) !== null) held.push(id);
    return held;
  }

  /**
   * Until when an attempt of the subscription about to start must wait (epoch ms), or null: held
   * here, or with `readStored` held in the database past the clock's time once it was read.
   */
  async atStart(subscriptionId: string, clock: Clock, readStored: boolean): Promise<number | null> {
    const nowMs = clock.now().getTime();
    const held = this.heldUntil(subscriptionId, nowMs);
    if (held !== null || !readStored) return held;
    const stored = await this.stored(subscriptionId, nowMs);
    if (stored === null || stored <= clock.now().getTime()) return null;
    this.hold(subscriptionId, stored);
    return stored;
  }

  /** The stored hold (epoch ms), from a read no older than STORED_HOLD_READ_MS at `nowMs`. */
  private stored(subscriptionId: string, nowMs: number): Promise<number | null> {
    const last = this.reads.get(subscriptionId);
    if (last !== undefined && nowMs - last.atMs < STORED_HOLD_READ_MS) return last.until;
    const until = this.read(subscriptionId).then(
      (stored) => (stored === null ? null : Date.parse(stored)),
      () => null,
    );
    this.reads.remember(subscriptionId, { atMs: nowMs, until });
    return until;
  }
}
