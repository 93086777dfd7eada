import type { Clock } from '../lib/clock.ts';
import { firstIdAt } from '../lib/ids.ts';
import { pacedBatches } from '../lib/paced-batches.ts';
import type { RetentionRepository } from '../repositories/retention-repository.ts';

interface RetentionServiceDeps {
  retention: RetentionRepository;
  clock: Clock;
  /** RETENTION_DAYS; 0 keeps everything. */
  days: number;
}

type RetainedTable = 'deliveries' | 'events' | 'notifications';

export interface PurgeOptions {
  /** Most rows one statement deletes. */
  batchSize?: number;
  /**
   * After each statement, a pause of this many times its duration (at least 1 ms), so the purge
   * takes at most 1/(1+factor) of the database's (and, on SQLite, this thread's) time.
   */
  pauseFactor?: number;
  /** Stops between statements (the worker is stopping). */
  signal?: AbortSignal;
  /** Called after every statement with what it deleted. */
  onBatch?: (table: RetainedTable, rows: number) => void;
}

export interface PurgeReport {
  /** Rows created before this instant were due. */
  cutoff: string;
  /** Deliveries deleted (their attempts went with them). */
  deliveries: number;
  events: number;
  notifications: number;
  statements: number;
  ms: number;
}

const DAY_MS = 86_400_000;
export const PURGE_BATCH = 200;
const PAUSE_FACTOR = 2;

/**
 * Retention (RETENTION_DAYS): what is older than the retention period and needed by no one is
 * deleted: deliveries that are finished (or can never be sent: their subscription was deleted) with
 * their attempts, then events no delivery refers to any more, then notifications. Pending
 * deliveries of live subscriptions (a paused endpoint's backlog) and their events are kept
 * whatever their age. Deleted subscriptions' own rows stay (a delete is soft: still listed); their
 * deliveries follow the rule above.
 */
export class RetentionService {
  constructor(private readonly deps: RetentionServiceDeps) {}

  get enabled(): boolean {
    return this.deps.days > 0;
  }

  /** Rows created before this are past retention. */
  cutoff(): Date {
    return new Date(this.deps.clock.now().getTime() - this.deps.days * DAY_MS);
  }

  /**
   * One purge, in statements of at most `batchSize` rows, each walking an index from where the
   * previous one stopped (rows kept are passed over once). Null when retention is off.
   */
  async purge(options: PurgeOptions = {}): Promise<PurgeReport | null> {
    if (!this.enabled) return null;
    const { retention } = this.deps;
    const limit = options.batchSize ?? PURGE_BATCH;
    const factor = options.pauseFactor ?? PAUSE_FACTOR;
    const started = performance.now();
    const cutoff = this.cutoff();
    const before = cutoff.toISOString();
    const report: PurgeReport = {
      cutoff: before,
      deliveries: 0,
      events: 0,
      notifications: 0,
      statements: 0,
      ms: 0,
    };
    const pacing = { batchSize: limit, pauseFactor: factor, signal: options.signal };
    const walk = <K>(table: RetainedTable, first: K, run: (after: K) => Promise<K[]>) =>
      pacedBatches(first, pacing, run, (rows) => {
        report.statements++;
        report[table] += rows;
        options.onBatch?.(table, rows);
      });

    const lastDelivery = firstIdAt('dlv', cutoff.getTime());
    await walk('deliveries', '', (after) => retention.deleteDeliveries(after, lastDelivery, limit));
    // Missed events past retention are not recovered: their events may go too.
    await retention.deleteMissedBefore(before);
    report.statements++;
    const lastSeq = await retention.lastEventSeqBefore(before);
    if (lastSeq !== null) {
      await walk('events', 0, (after) => retention.deleteEvents(after, lastSeq, before, limit));
    }
    const lastNotification = firstIdAt('ntf', cutoff.getTime());
    await walk('notifications', '', (after) =>
      retention.deleteNotifications(after, lastNotification, limit),
    );
    report.ms = Math.round(performance.now() - started);
    return report;
  }
}
