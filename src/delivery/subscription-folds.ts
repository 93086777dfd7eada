import type { Selectable } from 'kysely';
import type { Config } from '../config.ts';
import type { WebhookSubscriptionsTable } from '../db/schema.ts';
import { subscriptionMove } from '../domain/webhook-moves.ts';
import { newId } from '../lib/ids.ts';
import type { PausedNotice } from '../notifications/mailer.ts';
import type { MembersRepository } from '../repositories/members-repository.ts';
import type { NotificationsRepository } from '../repositories/notifications-repository.ts';
import type { SubscriptionFold, WebhooksRepository } from '../repositories/webhooks-repository.ts';
import type { EventsService } from '../services/events-service.ts';
import { foldAttempts } from './cascade.ts';
import { type ConcurrencySample, foldConcurrency } from './concurrency.ts';
import type { SettledAttempt } from './types.ts';

/** What a fold writes through (the recorder's). */
export interface FoldDeps {
  subscriptions: WebhooksRepository;
  members: MembersRepository;
  notifications: NotificationsRepository;
  /** Announces pauses as operational events. */
  events: EventsService;
  webhook: Pick<Config['webhook'], 'autopauseFailures' | 'autopauseWindowMs'>;
}

/**
 * Folds a recorded batch into its subscriptions' counters and concurrency limits and sets their
 * holds (`heldUntil`, unless held longer already), in the recorder's transaction: auto-pause
 * with its announcement and notification rows; `rows`: the subscriptions, locked. Returns the
 * pauses, to be mailed once committed.
 */
export async function foldIntoSubscriptions(
  deps: FoldDeps,
  rows: readonly Selectable<WebhookSubscriptionsTable>[],
  batch: readonly SettledAttempt[],
  holds: ReadonlyMap<string, string>,
): Promise<PausedNotice[]> {
  const paused: PausedNotice[] = [];
  const folds: SubscriptionFold[] = [];
  const { subscriptions, members, notifications, webhook } = deps;
  const rule = { failures: webhook.autopauseFailures, windowMs: webhook.autopauseWindowMs };
  for (const row of rows) {
    const attempts = batch.filter((s) => s.delivery.subscriptionId === row.id);
    const hold = holds.get(row.id);
    const held =
      hold !== undefined && (row.heldUntil === null || row.heldUntil < hold)
        ? { heldUntil: hold }
        : {};
    if (attempts.length === 0) {
      // Only a test fire asked to wait: the hold alone, no counter.
      if ('heldUntil' in held) await subscriptions.updateSubscription(row.tenantId, row.id, held);
      continue;
    }
    const { counters, pause } = foldAttempts(
      row,
      attempts.map((s) => ({
        status: s.status,
        at: s.at,
        errorClass: s.attempt.errorClass,
        credentialsRefused: s.credentialsRefused,
      })),
      rule,
      row.active,
    );
    const concurrency = foldConcurrency(
      { limit: row.concurrencyLimit, backedOff: row.backedOff },
      attempts.map(concurrencySample),
      row.maxConcurrency,
    );
    if (!pause) {
      // The common case, every such subscription of the batch in one statement below.
      const { limit, backedOff } = concurrency;
      const heldUntil = held.heldUntil ?? null;
      folds.push({
        tenantId: row.tenantId,
        id: row.id,
        ...counters,
        heldUntil,
        concurrencyLimit: limit,
        backedOff: backedOff ? 1 : 0,
      });
      continue;
    }
    const now = attempts[attempts.length - 1].at;
    await subscriptions.updateSubscription(row.tenantId, row.id, {
      ...counters,
      ...held,
      concurrencyLimit: concurrency.limit,
      backedOff: concurrency.backedOff,
      ...subscriptionMove(pause === 'gone' ? 'gone' : 'autoPause', now),
    });
    // Told to the tenant's other endpoints, never to the one it is about.
    await deps.events.emit(
      row.tenantId,
      'webhook.endpoint.paused',
      { subscriptionId: row.id, url: row.url, reason: pause },
      { except: row.id },
    );
    const recipients = await members.ownersAndAdmins(row.tenantId);
    await notifications.insertMany(
      recipients.map((member) => ({
        id: newId('ntf'),
        tenantId: row.tenantId,
        memberId: member.id,
        recipient: member.email,
        kind: 'webhook_paused',
        subscriptionId: row.id,
        createdAt: now,
      })),
    );
    paused.push({
      to: recipients.map((member) => member.email),
      tenantId: row.tenantId,
      subscriptionId: row.id,
      url: row.url,
      pausedAt: now,
      reason: pause,
      clientErrorRun: counters.clientErrorRun,
    });
  }
  await subscriptions.setFolds(folds);
  return paused;
}

/** What an attempt tells its subscription's concurrency limit (see nextConcurrency). */
function concurrencySample(settled: SettledAttempt): ConcurrencySample {
  return {
    limitAtSend: settled.attempt.concurrencyLimit,
    runningAtSend: settled.runningAtSend,
    status: settled.status,
    errorClass: settled.attempt.errorClass,
  };
}
