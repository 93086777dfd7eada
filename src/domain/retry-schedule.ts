import { durationMs, durationText } from './durations.ts';

/**
 * A subscription's own retry schedule: the waits between its attempts, in place of the
 * deployment's WEBHOOK_RETRY_SCHEDULE for that subscription alone (attempts = waits + 1). A
 * receiver's `Retry-After` still wins where it is later (see nextStep).
 */
export const RETRY_SCHEDULE_LIMITS = Object.freeze({
  waits: 10,
  minMs: 1000,
  maxMs: 24 * 3_600_000,
});

/** The faults of a schedule as written, keyed `retrySchedule[.<index>]`; empty when none. */
export function retryScheduleFaults(waits: readonly string[]): Record<string, string[]> {
  const { waits: most, minMs, maxMs } = RETRY_SCHEDULE_LIMITS;
  if (waits.length < 1 || waits.length > most) {
    return { retrySchedule: [`must hold 1 to ${most} waits; it holds ${waits.length}`] };
  }
  const errors: Record<string, string[]> = {};
  waits.forEach((wait, i) => {
    const ms = durationMs(wait);
    if (ms === null) {
      errors[`retrySchedule.${i}`] = [
        'is not a duration (a whole number followed by ms, s, m or h, e.g. 30s)',
      ];
    } else if (ms < minMs || ms > maxMs) {
      errors[`retrySchedule.${i}`] = [
        `must be from ${durationText(minMs)} to ${durationText(maxMs)}`,
      ];
    }
  });
  return errors;
}

/** A checked schedule's waits in milliseconds. */
export function retryScheduleMs(waits: readonly string[]): number[] {
  return waits.map((wait) => durationMs(wait) as number);
}
