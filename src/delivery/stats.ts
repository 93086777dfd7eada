import type { Config } from '../config.ts';
import { expiresSoon, type ReceiverAuthShown } from '../domain/receiver-auth.ts';
import type { Clock } from '../lib/clock.ts';
import type { QueueStats } from '../lib/metrics.ts';
import type { DeliveryQueue } from './queue.ts';
import { abandonedBefore } from './registry.ts';

/** The queue's figures as the metrics and /readyz show them. */
export async function queueStats(
  queue: DeliveryQueue,
  clock: Clock,
  webhook: Pick<Config['webhook'], 'timeoutMs' | 'leaseGraceMs'>,
): Promise<QueueStats> {
  const now = clock.now();
  const nowMs = now.getTime();
  const { aliveSince, staleBefore } = abandonedBefore(nowMs, webhook);
  const stats = await queue.stats(now.toISOString(), aliveSince, staleBefore);
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
