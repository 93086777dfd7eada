/**
 * A line about something that keeps happening (every batch of spans that fails to leave), said
 * at most once an interval: the first at once, then the next one an interval later with the
 * count of those left unsaid meanwhile.
 */
export class LogThrottle {
  private lastSaidAt = Number.NEGATIVE_INFINITY;
  private unsaid = 0;

  constructor(
    private readonly intervalMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether to say this one, with how many went unsaid before it; null to keep it unsaid. */
  next(): { unsaid: number } | null {
    const at = this.now();
    if (at - this.lastSaidAt < this.intervalMs) {
      this.unsaid += 1;
      return null;
    }
    const said = { unsaid: this.unsaid };
    this.lastSaidAt = at;
    this.unsaid = 0;
    return said;
  }
}
