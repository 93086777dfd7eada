/**
 * Time-outs that judge an answer late only on time this process could run, and only after the
 * I/O that arrived meanwhile has been read.
 *
 * A process stalled (one long callback, a module loading, or a busy machine giving it no core)
 * cannot tell a server that did not answer from answers it has not read yet. Its timers come
 * due at the start of the loop's next turn, before the loop polls for I/O: a plain timer takes
 * a database, a receiver or a store that answered in time for one that did not, and an answer
 * that needs a few round trips (a connection's handshake) has had none of them. So a deadline
 * counts the running clock below, which counts a stall as two ticks at most, and when it passes
 * it calls `late` from setImmediate, after that turn's poll.
 */

/** How often the running clock ticks; a longer gap between two readings was a stall. */
const TICK_MS = 100;
let ran = 0;
let readAt = performance.now();
let ticker: NodeJS.Timeout | null = null;

/** Milliseconds of this process's running time: performance.now() less its stalls. */
export function runningNow(): number {
  const now = performance.now();
  ran += Math.min(now - readAt, 2 * TICK_MS);
  readAt = now;
  ticker ??= setInterval(runningNow, TICK_MS).unref();
  return ran;
}

/** Calls `late` once `ms` of running time have passed and pending I/O has been read. */
export function deadline(ms: number, late: () => void): { cancel(): void } {
  let cancelled = false;
  const start = runningNow();
  const fire = () => {
    const left = ms - (runningNow() - start);
    if (left > 0) timer = setTimeout(fire, left);
    else
      setImmediate(() => {
        if (!cancelled) late();
      });
  };
  let timer = setTimeout(fire, ms);
  return {
    cancel() {
      cancelled = true;
      clearTimeout(timer);
    },
  };
}

/** `work`'s outcome, or `late()`'s (its value, or its throw) once the deadline has passed. */
export async function withDeadline<T>(work: Promise<T>, ms: number, late: () => T): Promise<T> {
  let timer: { cancel(): void } | undefined;
  const lateOutcome = new Promise<T>((resolve, reject) => {
    timer = deadline(ms, () => {
      try {
        resolve(late());
      } catch (error) {
        reject(error);
      }
    });
  });
  try {
    return await Promise.race([work, lateOutcome]);
  } finally {
    timer?.cancel();
  }
}
