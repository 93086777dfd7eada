import { SpanKind } from '@opentelemetry/api';
import { DELIVERIES_CHANNEL, type Notifier } from '../db/notifier.ts';
import { changesBetween, publicObject, resourceOfEvent } from '../domain/change-events.ts';
import { assertEventData, type EventData } from '../domain/event-schemas.ts';
import { orderingKey } from '../domain/flow-control.ts';
import { FilterMatchers } from '../domain/payload-filter.ts';
import { eventReadScope } from '../domain/plans.ts';
import type { EventType } from '../domain/states.ts';
import { type Clock, nowIso } from '../lib/clock.ts';
import { newEventId, newId } from '../lib/ids.ts';
import { parseStoredJson } from '../lib/json.ts';
import { notFound, scopeRequired } from '../lib/problems.ts';
import { ATTR, traceparentOf, tracer, tracing } from '../lib/tracing.ts';
import type { EventsRepository } from '../repositories/events-repository.ts';
import type { DeliveryRow, WebhooksRepository } from '../repositories/webhooks-repository.ts';

/**
 * Writes events into the outbox inside the caller's transaction, with one delivery row per active
 * subscription of the tenant whose events list has the type and whose filter takes the event (a
 * missed-event row per paused one): an event exists, and is queued for every subscriber, exactly
 * when the state change it reports was committed.
 */
interface EventsServiceDeps {
  events: EventsRepository;
  webhooks: WebhooksRepository;
  notifier: Notifier;
  clock: Clock;
}

/** The event types whose data carries a resource's `object` and `changes`. */
export type ChangeEventType = {
  [K in EventType]: EventData<K> extends { object: unknown } ? K : never;
}[EventType];

/** An event's body as `GET /api/v1/events/{id}` answers it. */
export interface EventBody {
  id: string;
  type: EventType;
  created: number;
  test?: true;
  data: Record<string, unknown>;
}

export class EventsService {
  /** Each stored filter compiled once, for every emit of this process. */
  private readonly filters = new FilterMatchers();

  constructor(private readonly deps: EventsServiceDeps) {}

  /**
   * Records the event and queues one delivery per matching active subscription (but `except`: the
   * one an operational event is about), each with that subscription's next sequence (see
   * WebhooksRepository.takeSequences): the counter rows stay locked until the caller's
   * transaction ends, so sequences follow commit order. A matching paused one is noted as having
   * missed it. One whose filter refuses the event gets nothing: no delivery, no sequence, no note.
   */
  async emit<T extends EventType>(
    tenantId: string,
    type: T,
    data: EventData<T>,
    options: { except?: string } = {},
  ): Promise<string> {
    const createdAt = nowIso(this.deps.clock);
    const id = await this.record(tenantId, type, data, { createdAt });
    const event = { type, data };
    const subscriptions = (await this.deps.webhooks.liveSubscriptions(tenantId)).filter(
      (s) =>
        s.id !== options.except &&
        parseStoredJson<string[]>(s.events).includes(type) &&
        this.filters.matches(s.filter, event),
    );
    const objectKey = orderingKey(type, data);
    // A paused subscription gets no delivery; the event is kept for it (recover with `missed`).
    const paused = subscriptions.filter((s) => !s.active);
    if (paused.length > 0) {
      await this.deps.webhooks.insertMissed(
        paused.map((s) => ({
          subscriptionId: s.id,
          eventId: id,
          tenantId,
          eventType: type,
          objectKey,
          eventCreatedAt: createdAt,
        })),
      );
    }
    const matching = subscriptions.filter((s) => s.active).map((s) => s.id);
    if (matching.length === 0) return id;
    const sequences = await this.deps.webhooks.takeSequences(tenantId, matching);
    await this.insertPending(
      tenantId,
      matching.map((subscriptionId) => ({
        subscriptionId,
        eventId: id,
        eventType: type,
        redeliveredFromId: null,
        isTest: false,
        sequence: sequences.get(subscriptionId) ?? null,
        objectKey,
      })),
    );
    return id;
  }

  /**
   * The events about one change of a trip, booking, client or payment (see emit; several when a
   * move names several types): their own `members`, then the resource after the change as its
   * GET shows it (`object`) and the public members that moved from `before` (`changes`; null
   * before: a creation). `before` and `after` are what the resource's read returns, read in the
   * change's transaction.
   */
  async emitChange<T extends ChangeEventType>(
    tenantId: string,
    types: T | readonly T[],
    members: Omit<EventData<T>, 'object' | 'changes'>,
    change: { before: object | null; after: object },
  ): Promise<void> {
    const list: readonly T[] = typeof types === 'string' ? [types] : types;
    // The types of one change are about one resource (a dispute's is its booking).
    const kind = resourceOfEvent(list[0]);
    if (kind === null) throw new Error(`${list[0]} is about no resource`);
    const object = publicObject(kind, change.after);
    const before = change.before === null ? null : publicObject(kind, change.before);
    const data = { ...members, object, changes: changesBetween(before, object) };
    for (const type of list) await this.emit(tenantId, type, data as unknown as EventData<T>);
  }

  /** The event alone, validated against its published schema; `queue` sends it. */
  async record<T extends EventType>(
    tenantId: string,
    type: T,
    data: EventData<T>,
    options: { test?: boolean; createdAt?: string } = {},
  ): Promise<string> {
    assertEventData(type, data);
    const id = newEventId();
    await this.deps.events.insert({
      id,
      tenantId,
      type,
      data: JSON.stringify(data),
      isTest: options.test === true,
      traceContext: tracing.on ? produced(tenantId, type, id) : null,
      createdAt: options.createdAt ?? nowIso(this.deps.clock),
    });
    return id;
  }

  /**
   * One event's full body as a full subscription gets it, without `sequence` (a ledger's, not the
   * event's) and with its creation as `created`; 404 across tenants and past retention; 403 when
   * `scopes` lack the read scope of the event's resource.
   */
  async body(tenantId: string, id: string, scopes: ReadonlySet<string>): Promise<EventBody> {
    const row = await this.deps.events.find(tenantId, id);
    if (row === undefined) throw notFound('Event');
    const scope = eventReadScope(row.type);
    if (!scopes.has(scope)) throw scopeRequired(scope);
    return {
      id: row.id,
      type: row.type as EventType,
      created: Math.floor(Date.parse(row.createdAt) / 1000),
      ...(row.isTest ? { test: true as const } : {}),
      data: parseStoredJson<Record<string, unknown>>(row.data),
    };
  }

  /** Where a reader of the tenant's events from now on starts (`after`). */
  newestSeq(tenantId: string): Promise<number> {
    return this.deps.events.newestSeq(tenantId);
  }

  /** The tenant's events after `afterSeq`, oldest first, test fires excluded (`tourops listen`). */
  after(tenantId: string, afterSeq: number, limit: number) {
    return this.deps.events.after(tenantId, afterSeq, limit);
  }

  /**
   * One pending delivery, due now, of each event a paused subscription missed, in the order they
   * were emitted, each with the subscription's next sequence.
   */
  async queueMissed(
    tenantId: string,
    subscriptionId: string,
    missed: ReadonlyArray<{ eventId: string; eventType: string; objectKey: string | null }>,
  ): Promise<string[]> {
    if (missed.length === 0) return [];
    const taken = await this.deps.webhooks.takeSequences(tenantId, [subscriptionId], missed.length);
    const last = taken.get(subscriptionId) as number;
    const first = last - missed.length + 1;
    return this.insertPending(
      tenantId,
      missed.map((event, index) => ({
        subscriptionId,
        eventId: event.eventId,
        eventType: event.eventType,
        redeliveredFromId: null,
        isTest: false,
        sequence: first + index,
        objectKey: event.objectKey,
      })),
    );
  }

  /** One pending delivery of a test fire per subscription, due now: it takes no sequence. */
  async queueTest(
    tenantId: string,
    eventId: string,
    type: EventType,
    subscriptionIds: string[],
  ): Promise<string[]> {
    return this.insertPending(
      tenantId,
      subscriptionIds.map((subscriptionId) => ({
        subscriptionId,
        eventId,
        eventType: type,
        redeliveredFromId: null,
        isTest: true,
        sequence: null,
        objectKey: null,
      })),
    );
  }

  /**
   * One pending redelivery, due now, of each delivery given (redeliver, recover), to its
   * subscription: same event, same sequence.
   */
  requeue(
    tenantId: string,
    subscriptionId: string,
    originals: ReadonlyArray<
      Pick<DeliveryRow, 'id' | 'eventId' | 'eventType' | 'isTest' | 'sequence' | 'objectKey'>
    >,
  ): Promise<string[]> {
    return this.insertPending(
      tenantId,
      originals.map((original) => ({
        subscriptionId,
        eventId: original.eventId,
        eventType: original.eventType,
        redeliveredFromId: original.id,
        isTest: original.isTest,
        sequence: original.sequence,
        objectKey: original.objectKey,
      })),
    );
  }

  private async insertPending(
    tenantId: string,
    deliveries: Array<{
      subscriptionId: string;
      eventId: string;
      eventType: string;
      redeliveredFromId: string | null;
      isTest: boolean;
      sequence: number | null;
      objectKey: string | null;
    }>,
  ): Promise<string[]> {
    if (deliveries.length === 0) return [];
    const now = nowIso(this.deps.clock);
    const rows = deliveries.map((delivery) => ({
      ...delivery,
      id: newId('dlv'),
      tenantId,
      status: 'pending' as const,
      attempts: 0,
      lastResponseStatus: null,
      nextAttemptAt: now,
      deliveredAt: null,
      claimedAt: null,
      createdAt: now,
    }));
    await this.deps.webhooks.insertDeliveries(rows);
    await this.deps.notifier.publish(DELIVERIES_CHANNEL);
    return rows.map((row) => row.id);
  }
}

/**
 * The producer span of an event, a child of the request (or command) that made it; its context is
 * stored with the event, for every delivery attempt's span to link to.
 */
function produced(tenantId: string, type: string, id: string): string | null {
  const span = tracer.startSpan(`create ${type}`, {
    kind: SpanKind.PRODUCER,
    attributes: {
      'messaging.system': 'tourops',
      'messaging.operation.type': 'create',
      'messaging.destination.name': type,
      'messaging.message.id': id,
      [ATTR.tenantId]: tenantId,
    },
  });
  span.end();
  return traceparentOf(span);
}
