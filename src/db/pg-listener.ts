import pg from 'pg';
import type { Logger } from 'pino';

/**
 * A dedicated connection that LISTENs on PostgreSQL channels and reconnects after a failure.
 * Notifications are a latency optimisation: every consumer must stay correct without them.
 */
export class PgListener {
  private client: pg.Client | null = null;
  private readonly handlers = new Map<string, (payload: string) => void>();
  private closed = false;
  private retryTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly connectionString: string,
    private readonly logger: Logger,
  ) {}

  on(channel: string, handler: (payload: string) => void): void {
    if (!/^[a-z_]+$/.test(channel)) throw new Error(`bad channel name ${channel}`);
    this.handlers.set(channel, handler);
  }

  async start(): Promise<void> {
    const client = new pg.Client({ connectionString: this.connectionString });
    client.on('notification', (message) => {
      this.handlers.get(message.channel)?.(message.payload ?? '');
    });
    client.on('error', (error) => {
      this.logger.warn({ err: error }, 'LISTEN connection failed; reconnecting');
      this.reconnectSoon(client);
    });
    client.on('end', () => this.reconnectSoon(client));
    await client.connect();
    for (const channel of this.handlers.keys()) await client.query(`listen ${channel}`);
    this.client = client;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }

  private reconnectSoon(failed: pg.Client): void {
    if (this.closed || this.client !== failed) return;
    this.client = null;
    failed.end().catch(() => undefined);
    this.scheduleStart(250);
  }

  /** Retries with a doubling delay up to 5 s; consumers rely on their own fallbacks meanwhile. */
  private scheduleStart(delayMs: number): void {
    if (this.closed) return;
    this.retryTimer = setTimeout(() => {
      this.start().catch((error) => {
        this.logger.warn({ err: error }, 'LISTEN reconnect failed; retrying');
        this.scheduleStart(Math.min(delayMs * 2, 5000));
      });
    }, delayMs);
  }
}
