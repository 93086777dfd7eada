import type { Kysely } from 'kysely';
import type { DB } from '../../src/db/schema.ts';

/** One attempt as the attempt log keeps it, with its start and end as epoch ms. */
export interface LoggedAttempt {
  deliveryId: string;
  attempt: number;
  status: number | null;
  startMs: number;
  endMs: number;
}

/** Every attempt to a subscription, by start time: what time promises are checked against. */
export async function attemptLog(db: Kysely<DB>, subscriptionId: string): Promise<LoggedAttempt[]> {
  const rows = await db
    .selectFrom('webhookAttempts as a')
    .innerJoin('webhookDeliveries as d', 'd.id', 'a.deliveryId')
    .select(['a.deliveryId', 'a.attempt', 'a.status', 'a.startedAt', 'a.durationMs'])
    .where('d.subscriptionId', '=', subscriptionId)
    .execute();
  return rows
    .map((row) => {
      const startMs = Date.parse(row.startedAt);
      return {
        deliveryId: row.deliveryId,
        attempt: row.attempt,
        status: row.status,
        startMs,
        endMs: startMs + row.durationMs,
      };
    })
    .sort((a, b) => a.startMs - b.startMs);
}

/**
 * How many ms after `answer` ended each attempt started that started more than `fromMs` and less
 * than `untilMs` after it: a hold the answer asked for should leave this empty.
 */
export function startsAfter(
  log: readonly LoggedAttempt[],
  answer: LoggedAttempt,
  fromMs: number,
  untilMs: number,
): number[] {
  return log
    .filter((a) => a.startMs > answer.endMs + fromMs && a.startMs < answer.endMs + untilMs)
    .map((a) => a.startMs - answer.endMs);
}

/** The most of `times` (epoch ms) within any window [t, t + windowMs), t sliding. */
export function mostWithin(times: readonly number[], windowMs = 1_000): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  let first = 0;
  for (let last = 0; last < sorted.length; last++) {
    while (sorted[last] - sorted[first] >= windowMs) first += 1;
    most = Math.max(most, last - first + 1);
  }
  return most;
}

/**
 * Whether a delivered body's `created` ("unix seconds at the moment of sending") names a second
 * its attempt spanned, as the attempt log records the send.
 */
export function createdWithin(body: string, attempt: LoggedAttempt): boolean {
  const created = Number(JSON.parse(body).created);
  return (
    created >= Math.floor(attempt.startMs / 1000) && created <= Math.floor(attempt.endMs / 1000)
  );
}
