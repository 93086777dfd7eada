import type { Config } from '../config.ts';
import { expiresSoon, type ReceiverAuthShown } from '../domain/receiver-auth.ts';
import type { Clock } from '../lib/clock.ts';
import type { QueueStats } from '../lib/metrics.ts';
import { Repository } from '../repositories/repository.ts';
import { abandoned } from './claim-sql.ts';
import { abandonedBefore } from './registry.ts';

/** The statements behind the queue's gauges; they span tenants, as the queue does. */
export class QueueFigures extends Repository {
  /**
   * What the queue holds (the metrics' gauges): pending rows and the earliest due time, through
   * webhook_queue_due_idx (partial: unclaimed rows only); abandoned
   * claims; paused live subscriptions; the client certificates of live ones, as reads show them.
   */
  async read(
    now: string,
    aliveSince: string,
    staleBefore: string,
  ): Promise<{
    pending: number;
    oldestDue: string | null;
    abandoned: number;
    paused: number;
    receiverAuth: string[];
  }> {
    const queue = await this.db
      .selectFrom('webhookQueue')
      .select((eb) => [
        eb.fn.countAll<number>().as('n'),
        eb.fn
          .min(
            eb
              .case()
              .when('nextAttemptAt', '<=', now)
              .then(eb.ref('nextAttemptAt'))
              .else(null)
              .end(),
          )
          .as('oldestDue'),
      ])
      .where('claimedAt', 'is', null)
      .executeTakeFirstOrThrow();
    const lost = await this.db
      .selectFrom('webhookQueue as d')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where(abandoned('d', aliveSince, staleBefore, ''))
      .executeTakeFirstOrThrow();
    const paused = await this.db
      .selectFrom('webhookSubscriptions')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('active', '=', false)
      .where('deletedAt', 'is', null)
      .executeTakeFirstOrThrow();
    // Few rows carry receiver authentication, and this runs once per scrape interval at most.
    const withAuth = await this.db
      .selectFrom('webhookSubscriptions')
      .select('receiverAuth')
      .where('receiverAuth', 'is not', null)
      .where('deletedAt', 'is', null)
      .execute();
    return {
      pending: Number(queue.n),
      oldestDue: (queue.oldestDue as string | null) ?? null,
      abandoned: Number(lost.n),
      paused: Number(paused.n),
      receiverAuth: withAuth.map((row) => row.receiverAuth as string),
    };
  }
}

/** The queue's figures as the metrics and /readyz show them. */
export async function queueStats(
  figures: QueueFigures,
  clock: Clock,
  webhook: Pick<Config['webhook'], 'timeoutMs' | 'leaseGraceMs' | 'workerDeadAfterMs'>,
): Promise<QueueStats> {
  const now = clock.now();
  const nowMs = now.getTime();
  const { aliveSince, staleBefore } = abandonedBefore(nowMs, webhook);
  const stats = await figures.read(now.toISOString(), aliveSince, staleBefore);
  return {
    pending: stats.pending,
    stuck: stats.abandoned,
    oldestDueAgeSeconds:
      stats.oldestDue === null ? 0 : Math.max(0, (nowMs - Date.parse(stats.oldestDue)) / 1000),
    pausedSubscriptions: stats.paused,
    expiringClientCertificates: stats.receiverAuth.filter((text) => {
      const notAfter = (JSON.parse(text) as Partial<ReceiverAuthShown>).clientCertificate?.notAfter;
      return notAfter !== undefined && expiresSoon(notAfter, nowMs);
    }).length,
  };
}
