import { type Kysely, sql } from 'kysely';
import type { DB } from '../../src/db/schema.ts';
import { shownAttempts, shownStatus } from '../../src/repositories/webhooks-repository.ts';

/**
 * The deliveries with their live state as the engine holds it (see migration 0032): the
 * history's row, and while it is queued its queue row's due time, claim and losses; status and
 * attempts as reads show them (shownStatus, shownAttempts). A select over one table, so that tests read it as they read any.
 */
export function deliveryRows(db: Kysely<DB>) {
  const live = db
    .selectFrom('webhookDeliveries as d')
    .leftJoin('webhookQueue as q', 'q.deliveryId', 'd.id')
    .select((eb) => [
      'd.id',
      'd.tenantId',
      'd.subscriptionId',
      'd.eventId',
      'd.eventType',
      shownStatus().as('status'),
      shownAttempts().as('attempts'),
      'd.lastResponseStatus',
      eb.fn.coalesce('q.nextAttemptAt', 'd.nextAttemptAt').as('nextAttemptAt'),
      'd.deliveredAt',
      'q.claimedAt',
      'q.claimedBy',
      'd.redeliveredFromId',
      'd.lastError',
      sql<number>`coalesce(q.worker_losses, d.worker_losses)`.as('workerLosses'),
      'd.isTest',
      'd.sequence',
      'd.objectKey',
      'd.createdAt',
    ]);
  return db.selectFrom(live.as('deliveries'));
}
