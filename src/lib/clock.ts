/** Injectable time source: tests move it instead of sleeping. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

export function nowIso(clock: Clock): string {
  return clock.now().toISOString();
}

/**
 * The time of a change to an object last changed at `previous`: now, or `previous` when the clock
 * reads earlier (another machine's clock behind the one that made the last change), so that one
 * object's `updatedAt` never goes backwards. ISO 8601 instants in UTC compare as strings.
 */
export function changedAt(clock: Clock, previous: string | null): string {
  const now = nowIso(clock);
  return previous !== null && previous > now ? previous : now;
}
