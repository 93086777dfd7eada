import type { FastifyBaseLogger } from 'fastify';

/**
 * One warning when the database becomes unavailable and one line when it answers again, instead
 * of an error and a stack per failed request while it is down.
 */
export class OutageLog {
  private since: number | null = null;

  constructor(private readonly log: FastifyBaseLogger) {}

  failed(error: unknown): void {
    if (this.since !== null) return;
    this.since = Date.now();
    const { code, message } = error as { code?: unknown; message?: unknown };
    this.log.warn(
      { code, reason: String(message) },
      'database unavailable: answering 503 service-unavailable until it is back',
    );
  }

  succeeded(): void {
    if (this.since === null) return;
    this.log.info({ outageMs: Date.now() - this.since }, 'database available again');
    this.since = null;
  }
}
