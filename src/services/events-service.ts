import type { Executor } from '../db/database.ts';
import { assertEventData, type EventData } from '../domain/event-schemas.ts';
import type { EventType } from '../domain/states.ts';
import { type Clock, nowIso } from '../lib/clock.ts';
import { newEventId } from '../lib/ids.ts';
import type { EventsRepository } from '../repositories/events-repository.ts';

/**
 * Writes events into the outbox inside the caller's transaction, so an event exists exactly when
 * the state change it reports was committed. Delivery reads the outbox later.
 */
export class EventsService {
  constructor(
    private readonly events: EventsRepository,
    private readonly clock: Clock,
  ) {}

  async emit<T extends EventType>(
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
}
