import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { ErasuresService } from './erasures-service.ts';

export interface ErasureRunnerOptions {
  /** Between two looks for an erasure to run. */
  pollMs?: number;
}

const POLL_MS = 1_000;

/**
 * Runs erasures in the worker: it looks for one every `pollMs` and runs it to the end. Several
 * workers may look at once; each erasure is leased to one (see ErasuresService.runNext), and one
 * whose runner died is taken over once its lease runs out.
 */
export class ErasureRunner {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private readonly abort = new AbortController();
  /** This runner's lease token. */
  private readonly token = randomUUID();
  private readonly pollMs: number;

  constructor(
    private readonly deps: { erasures: ErasuresService; logger: Logger },
    options: ErasureRunnerOptions = {},
  ) {
    this.pollMs = options.pollMs ?? POLL_MS;
  }

  start(): void {
    if (this.timer === null) this.schedule();
  }

  async stop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.abort.abort();
    await this.running;
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      this.running = this.runAll().finally(() => {
        this.running = null;
        if (!this.abort.signal.aborted) this.schedule();
      });
    }, this.pollMs);
    this.timer.unref();
  }

  private async runAll(): Promise<void> {
    const { erasures, logger } = this.deps;
    try {
      while (!this.abort.signal.aborted && (await erasures.runNext(this.token, this.abort.signal)));
    } catch (error) {
      // The batch that failed was rolled back; the next look resumes from the last one saved.
      logger.warn({ err: error }, 'erasure batch failed; resuming at the next look');
    }
  }
}
