/**
 * Durations as the configuration and the API write them: a whole number and a unit, `ms`, `s`,
 * `m` or `h` (`30s`, `5m`, `2h`).
 */

const DURATION_UNITS: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** `text` in milliseconds, or null when it is not a duration. */
export function durationMs(text: string): number | null {
  const match = /^(\d+)(ms|s|m|h)$/.exec(text.trim());
  return match === null ? null : Number(match[1]) * DURATION_UNITS[match[2]];
}

/** `90000` → `90s`: the largest unit that divides it. */
export function durationText(ms: number): string {
  for (const unit of ['h', 'm', 's'] as const) {
    const size = DURATION_UNITS[unit];
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}
