import type { Clock } from '../../src/lib/clock.ts';

/** A clock tests move by hand instead of sleeping. */
export class ManualClock implements Clock {
  private current: number;

  constructor(start: Date | string = new Date()) {
    this.current = new Date(start).getTime();
  }

  now(): Date {
    return new Date(this.current);
  }

  set(to: Date | string): void {
    this.current = new Date(to).getTime();
  }

  advance(ms: number): void {
    this.current += ms;
  }
}

/**
 * How much earlier than its delay a timer may fire, by a clock read outside the event loop: libuv
 * arms it from the loop turn's cached time, which lags the real time by as long as the turn has
 * run (and the clocks count whole milliseconds). A floor on a time-out is asserted less this.
 */
export const TIMER_SLACK_MS = 50;
