/**
 * Time-outs that judge an answer late only after the I/O that arrived meanwhile has been read.
 *
 * A timer that comes due while the process was held (a long callback, or a busy machine not
 * scheduling it) runs at the start of the event loop's next turn, before the loop polls for I/O:
 * an answer that arrived in time would lose to it, and a database, a receiver or a store that
 * answered would be taken for one that did not. `setImmediate` from the timer runs after that
 * poll, when the answer, if there is one, has been handled.
 */

/** Calls `late` once `ms` have passed and pending I/O has been read, unless cancelled first. */
export function deadline(ms: number, late: () => void): { cancel(): void } {
  let cancelled = false;
  const timer = setTimeout(
    () =>
      setImmediate(() => {
        if (!cancelled) late();
      }),
    ms,
  );
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
