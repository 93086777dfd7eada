import type { FastifyBaseLogger } from 'fastify';
import { DatabaseOutage } from '../../db/outage-breaker.ts';

/**
 * One warning when the database becomes unavailable and one line when it answers again, instead
 * of an error and a stack per failed request while it is down. The second line counts the 503s of
 * the outage by what ended each request's wait (see causeOf): whether the breaker answered them,
 * or a time-out each had to wait out.
 */
export class OutageLog {
  private since: number | null = null;
  private answered: Record<string, number> = {};

  constructor(private readonly log: FastifyBaseLogger) {}

  failed(error: unknown): void {
    const cause = causeOf(error);
    this.answered[cause] = (this.answered[cause] ?? 0) + 1;
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
    const { answered } = this;
    this.log.info({ outageMs: Date.now() - this.since, answered }, 'database available again');
    this.since = null;
    this.answered = {};
  }
}

/**
 * What ended a request's wait for the database: `breaker_cut` or `breaker_at_once` (see
 * DatabaseOutage), else the error's code (`ECONNREFUSED`, SQLSTATE `57014`...), else its message.
 */
function causeOf(error: unknown): string {
  if (error instanceof DatabaseOutage) return `breaker_${error.way}`;
  const { code, message } = error as { code?: unknown; message?: unknown };
  return typeof code === 'string' ? code : String(message).slice(0, 80);
}
