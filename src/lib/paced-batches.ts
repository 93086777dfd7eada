import { setTimeout as sleep } from 'node:timers/promises';

export interface PacedBatchOptions {
  /** Most rows one statement handles; a shorter batch ends the walk. */
  batchSize: number;
  /**
   * After each statement that found rows, a pause of this many times its duration (at least
   * 1 ms), so the walk takes at most 1/(1+factor) of the database's (on SQLite, this thread's)
   * time.
   */
  pauseFactor: number;
  /** Stops between statements (the process is stopping). */
  signal?: AbortSignal;
}

/**
 * Background deletes (retention, expired idempotency keys) in short statements instead of one
 * long lock: runs `run(after)` statement by statement, each going on from the last key the one
 * before returned (keys come back in index order), paced, until a batch shorter than
 * `batchSize` says the range is done. `onBatch` hears of every statement's row count.
 */
export async function pacedBatches<K>(
  first: K,
  options: PacedBatchOptions,
  run: (after: K) => Promise<K[]>,
  onBatch: (rows: number) => void,
): Promise<void> {
  for (let after = first; !options.signal?.aborted; ) {
    const started = performance.now();
    const keys = await run(after);
    onBatch(keys.length);
    if (keys.length === 0) return;
    await sleep(Math.max(1, (performance.now() - started) * options.pauseFactor));
    // A short batch found the end of the range (or, on PostgreSQL, rows another transaction holds).
    if (keys.length < options.batchSize) return;
    after = keys[keys.length - 1];
  }
}
