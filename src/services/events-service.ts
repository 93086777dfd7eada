import type { Executor } from '../db/database.ts';
import { assertEventData, type EventData } from '../domain/event-schemas.ts';
import type { EventType } from '../domain/states.ts';
import { type Clock, nowIso } from '../lib/clock.ts';
import { newEventId, newId } from '../lib/ids.ts';
import { parseStoredJson } from '../lib/json.ts';
import type { EventsRepository } from '../repositories/events-repository.ts';
import type { WebhooksRepository } from '../repositories/webhooks-repository.ts';
import type { DeliverySignal } from './delivery-signal.ts';

/**
 * Writes events into the outbox inside the caller's transaction, with one delivery row per active
 * subscription of the tenant whose events list has the type: an event exists, and is queued for
 * every subscriber, exactly when the state change it reports was committed.
 */
export class EventsService {
  constructor(
    private readonly events: EventsRepository,
    private readonly webhooks: WebhooksRepository,
    private readonly signal: DeliverySignal,
    private readonly clock: Clock,
  ) {}

  async emit<T extends EventType>(
    trx: Executor,
    tenantId: string,
    type: T,
    data: EventData<T>,
  ): Promise<string> {
    const id = await this.record(trx, tenantId, type, data);
    const subscriptions = await this.webhooks.activeSubscriptions(tenantId, trx);
    const matching = subscriptions
      .filter((s) => parseStoredJson<string[]>(s.events).includes(type))
      .map((s) => s.id);
    await this.queue(trx, tenantId, id, type, matching);
    return id;
  }

  /** The event alone, validated against its published schema; `queue` sends it. */
  async record<T extends EventType>(
    trx: Executor,
    tenantId: string,
    type: T,
    data: EventData<T>,
  ): Promise<string> {
    assertEventData(type, data);
    const id = newEventId();
    await this.events.insert(
      {
        id,
        tenantId,
        type,
        data: JSON.stringify(data),
        createdAt: nowIso(this.clock),
        dispatchedAt: null,
      },
      trx,
    );
    return id;
  }

  /** One pending delivery of the event per subscription, due now. */
  async queue(
    trx: Executor,
    tenantId: string,
    eventId: string,
    type: EventType,
    subscriptionIds: string[],
    redeliveredFromId: string | null = null,
  ): Promise<string[]> {
    if (subscriptionIds.length === 0) return [];
    const now = nowIso(this.clock);
    const rows = subscriptionIds.map((subscriptionId) => ({
      id: newId('dlv'),
      tenantId,
      subscriptionId,
      eventId,
      eventType: type,
      status: 'pending' as const,
      attempts: 0,
      lastResponseStatus: null,
      nextAttemptAt: now,
      deliveredAt: null,
      claimedAt: null,
      redeliveredFromId,
      createdAt: now,
    }));
    await this.webhooks.insertDeliveries(rows, trx);
    await this.signal.raise(trx);
    return rows.map((row) => row.id);
  }
}
