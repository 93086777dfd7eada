import type { ClaimedDelivery, SettledAttempt } from '../../src/delivery/types.ts';
import type { DeliveryWorker } from '../../src/delivery/worker.ts';
import type { PausedNotice } from '../../src/notifications/mailer.ts';
import { HUNG_AFTER_MS } from './until.ts';

type Status = SettledAttempt['outcome']['status'];

/**
 * Follows a worker's events (claimed, recorded, paused) so tests wait for exactly what they
 * expect instead of polling the database; what already happened counts too. A wait gives up only
 * once it has hung (HUNG_AFTER_MS), like every other.
 */
export class WorkerMonitor {
  private readonly claimedRows: ClaimedDelivery[] = [];
  private readonly recordedRows: SettledAttempt[] = [];
  private readonly pausedNotices: PausedNotice[] = [];
  private readonly waiters = new Set<() => void>();

  constructor(worker: DeliveryWorker) {
    worker.on('claimed', (rows) => this.add(this.claimedRows, rows));
    worker.on('recorded', (batch) => this.add(this.recordedRows, batch));
    worker.on('paused', (notice) => this.add(this.pausedNotices, [notice]));
  }

  /** The first recorded attempt of the subscription that left its delivery in `status`. */
  recorded(subscriptionId: string, status: Status): Promise<SettledAttempt> {
    return this.waitFor(
      () =>
        this.recordedRows.find(
          (s) => s.delivery.subscriptionId === subscriptionId && s.outcome.status === status,
        ),
      `a ${status} delivery of ${subscriptionId} recorded`,
    );
  }

  /** The first claim of a delivery of the subscription (its row is in flight once this resolves). */
  claimed(subscriptionId: string): Promise<ClaimedDelivery> {
    return this.waitFor(
      () => this.claimedRows.find((d) => d.subscriptionId === subscriptionId),
      `a delivery of ${subscriptionId} claimed`,
    );
  }

  /** The auto-pause of the subscription, once its transaction has committed. */
  paused(subscriptionId: string): Promise<PausedNotice> {
    return this.waitFor(
      () => this.pausedNotices.find((n) => n.subscriptionId === subscriptionId),
      `${subscriptionId} paused`,
    );
  }

  private add<T>(list: T[], items: readonly T[]): void {
    list.push(...items);
    for (const wake of this.waiters) wake();
  }

  private waitFor<T>(find: () => T | undefined, what: string): Promise<T> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = find();
        if (found === undefined) return;
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve(found);
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`${what}: not seen in ${HUNG_AFTER_MS} ms`));
      }, HUNG_AFTER_MS);
      this.waiters.add(check);
      check();
    });
  }
}
