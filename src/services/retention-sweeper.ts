import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import type { PurgeReport, RetentionService } from './retention-service.ts';

export interface SweeperOptions {
  /** First purge this long after start (start-up is left alone). */
  firstDelayMs?: number;
  /** Then one purge every this long. */
  intervalMs?: number;
}

export interface SweeperEvents {
  purged: [report: PurgeReport];
}

const FIRST_DELAY_MS = 10_000;
const INTERVAL_MS = 3_600_000;

/**
 * Runs the retention purge in the worker on a timer: one purge at a time, stopped between two
 * statements when the worker stops. Several workers may sweep at once (see RetentionRepository).
 */
export class RetentionSweeper extends EventEmitter<SweeperEvents> {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<PurgeReport | null> | null = null;
  private readonly abort = new AbortController();
  private readonly firstDelayMs: number;
  private readonly intervalMs: number;

  constructor(
    private readonly deps: { retention: RetentionService; logger: Logger },
    options: SweeperOptions = {},
  ) {
    super();
    this.firstDelayMs = options.firstDelayMs ?? FIRST_DELAY_MS;
    this.intervalMs = options.intervalMs ?? INTERVAL_MS;
  }

  start(): void {
    if (!this.deps.retention.enabled || this.timer !== null) return;
    this.schedule(this.firstDelayMs);
  }

  async stop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.abort.abort();
    await this.running;
  }

  /** A purge now, or the one already running. */
  runNow(): Promise<PurgeReport | null> {
    this.running ??= this.purge().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private schedule(ms: number): void {
    this.timer = setTimeout(() => {
      void this.runNow().finally(() => {
        if (!this.abort.signal.aborted) this.schedule(this.intervalMs);
      });
    }, ms);
    this.timer.unref();
  }

  private async purge(): Promise<PurgeReport | null> {
    const { logger, retention } = this.deps;
    try {
      const report = await retention.purge({ signal: this.abort.signal });
      if (report === null) return null;
      const deleted = report.deliveries + report.events + report.notifications;
      logger[deleted > 0 ? 'info' : 'debug'](report, 'retention purge done');
      this.emit('purged', report);
      return report;
    } catch (error) {
      // Nothing half-done matters: every statement stands alone. The next run starts over.
      logger.warn({ err: error }, 'retention purge failed; retrying at the next run');
      return null;
    }
  }
}
