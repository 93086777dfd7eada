import type { Database } from '../db/database.ts';
import type { DeliveryStatus } from '../db/schema.ts';
import { sampleEventData } from '../domain/event-samples.ts';
import type { EventData } from '../domain/event-schemas.ts';
import type { SubscribableEventType } from '../domain/states.ts';
import { type PayloadForm, thinData } from '../domain/thin-payload.ts';
import { mayRedeliver } from '../domain/webhook-moves.ts';
import { type Clock, nowIso } from '../lib/clock.ts';
import { keysetPage, type Page, type PageRequest } from '../lib/cursor.ts';
import { canonicalInstant } from '../lib/instant.ts';
import { parseStoredJson } from '../lib/json.ts';
import { ApiProblem, conflict, fieldError, notFound } from '../lib/problems.ts';
import type {
  AttemptRow,
  DeliveryRow,
  SubscriptionRow,
  WebhooksRepository,
} from '../repositories/webhooks-repository.ts';
import type { EventsService } from './events-service.ts';
import type { WebhooksService } from './webhooks-service.ts';

export type Delivery = Omit<DeliveryRow, 'tenantId' | 'subscriptionId' | 'objectKey'>;
export type Attempt = Omit<AttemptRow, 'tenantId' | 'deliveryId'>;

/** One event of a subscription's ledger, as push sends it, with its latest delivery. */
export interface LedgerEvent {
  id: string;
  type: string;
  /** Unix seconds of the event's creation (push sends the attempt's time). */
  created: number;
  data: Record<string, unknown>;
  sequence: number;
  deliveryStatus: DeliveryStatus;
  deliveryId: string;
}

export interface LedgerQuery {
  after: number;
  limit: number;
  type?: string;
  deliveryStatus?: DeliveryStatus;
}

const TEST_MESSAGE = 'This is a test event fired from POST /api/v1/webhooks/test.';

/** Most dead letters one recovery redelivers (contract: larger windows are refused). */
export const MAX_RECOVER = 10_000;
/** Rows a recovery writes per statement. */
const RECOVER_BATCH = 500;

/** An event's `data` in the subscription's form, as push sends it. */
function bodyData(stored: string, form: PayloadForm): Record<string, unknown> {
  const data = parseStoredJson<Record<string, unknown>>(stored);
  return form === 'thin' ? thinData(data) : data;
}

function toDelivery(row: DeliveryRow): Delivery {
  const { tenantId: _tenant, subscriptionId: _subscription, objectKey: _object, ...delivery } = row;
  return delivery;
}

/** Redeliveries go only to a subscription that would send them: 409 otherwise. */
function requireActive(subscription: SubscriptionRow): void {
  if (!subscription.active) {
    throw conflict('The subscription is paused or deleted.', 'subscription_inactive');
  }
}

/** A subscription's deliveries: listed, redelivered, recovered, tested, and its ledger. */
interface DeliveriesServiceDeps {
  database: Database;
  webhooks: WebhooksRepository;
  events: EventsService;
  subscriptions: WebhooksService;
  clock: Clock;
}

export class DeliveriesService {
  constructor(private readonly deps: DeliveriesServiceDeps) {}

  /**
   * The subscription's ledger after `after`, ascending: each event as push sends it, with its
   * latest delivery. Deleted and paused subscriptions keep theirs. Never a silent skip: a
   * sequence retention removed before the first event of the answer is 409 `events_expired`
   * (`firstSequence`: the first kept after it); one further on ends the page before it, so the
   * next request meets it first.
   */
  async ledger(
    tenantId: string,
    id: string,
    query: LedgerQuery,
  ): Promise<{ data: LedgerEvent[]; meta: { hasMore: boolean } }> {
    const subscription = await this.deps.subscriptions.existing(tenantId, id);
    const { after, limit } = query;
    const rows = await this.deps.webhooks.ledger(tenantId, id, { ...query, limit: limit + 1 });
    const page = rows.slice(0, limit);
    // The last sequence taken bounds an empty page's check (read once, kept for the 409).
    const last = page.length > 0 ? null : await this.deps.webhooks.lastSequence(tenantId, id);
    const upTo = last ?? page[page.length - 1].sequence;
    const missing = await this.deps.webhooks.firstMissingSequence(tenantId, id, after, upTo);
    if (missing !== null && (page.length === 0 || missing < page[0].sequence)) {
      const first =
        (await this.deps.webhooks.firstKeptSequence(tenantId, id, missing)) ??
        (last ?? (await this.deps.webhooks.lastSequence(tenantId, id))) + 1;
      throw new ApiProblem(
        'conflict',
        `Sequence ${missing} is past retention; the first kept after it is ${first}.`,
        { code: 'events_expired', firstSequence: first },
      );
    }
    const kept = missing === null ? page : page.filter((row) => row.sequence < missing);
    return {
      data: kept.map((row) => ({
        id: row.eventId,
        type: row.type,
        created: Math.floor(Date.parse(row.createdAt) / 1000),
        data: bodyData(row.data, subscription.payload),
        sequence: row.sequence,
        deliveryStatus: row.status,
        deliveryId: row.deliveryId,
      })),
      meta: { hasMore: missing !== null || rows.length > limit },
    };
  }

  /** Newest first; deleted subscriptions keep their history listable. */
  async listDeliveries(
    tenantId: string,
    id: string,
    query: PageRequest & { status?: DeliveryStatus; eventType?: string },
  ): Promise<Page<Delivery>> {
    await this.deps.subscriptions.existing(tenantId, id);
    const { status, eventType } = query;
    const page = await keysetPage('deliveries', query, (beforeId, limit) =>
      this.deps.webhooks.listDeliveries(tenantId, id, { beforeId, limit, status, eventType }),
    );
    return { data: page.data.map(toDelivery), meta: page.meta };
  }

  /** One delivery with the event it carries (its data as push sends it); 404 when unknown. */
  async getDelivery(
    tenantId: string,
    id: string,
    deliveryId: string,
  ): Promise<{ delivery: Delivery; eventData: Record<string, unknown> | null }> {
    await this.deps.subscriptions.existing(tenantId, id);
    const row = await this.deps.webhooks.findDelivery(tenantId, id, deliveryId);
    if (!row) throw notFound('Delivery');
    const data = await this.deps.webhooks.eventData(tenantId, row.eventId);
    return {
      delivery: toDelivery(row),
      eventData: data === undefined ? null : parseStoredJson<Record<string, unknown>>(data),
    };
  }

  /** The subscription a delivery belongs to, for the operator CLI (delivery ids are unique). */
  async subscriptionOfDelivery(deliveryId: string): Promise<string> {
    const id = await this.deps.webhooks.findDeliverySubscription(deliveryId);
    if (id === undefined) throw notFound('Delivery');
    return id;
  }

  /** A delivery's HTTP attempts, newest first; 404 for an unknown subscription or delivery. */
  async listAttempts(
    tenantId: string,
    id: string,
    deliveryId: string,
    query: PageRequest,
  ): Promise<Page<Attempt>> {
    await this.deps.subscriptions.existing(tenantId, id);
    if (!(await this.deps.webhooks.findDelivery(tenantId, id, deliveryId))) {
      throw notFound('Delivery');
    }
    const page = await keysetPage('attempts', query, (beforeId, limit) =>
      this.deps.webhooks.listAttempts(tenantId, deliveryId, { beforeId, limit }),
    );
    return {
      data: page.data.map(({ tenantId: _tenant, deliveryId: _delivery, ...attempt }) => attempt),
      meta: page.meta,
    };
  }

  /**
   * Redelivers every dead-lettered delivery of the subscription created in [since, until) (until
   * defaults to now): one new pending row each, as `redeliver` does, written in batches in one
   * transaction. A window holding more than MAX_RECOVER rows is refused (422) before anything
   * is queued.
   */
  async recover(
    tenantId: string,
    id: string,
    window: { since: string; until?: string; missed?: boolean },
  ): Promise<{ queued: number }> {
    const since = canonicalInstant('since', window.since);
    const until =
      window.until === undefined
        ? nowIso(this.deps.clock)
        : canonicalInstant('until', window.until);
    if (until <= since) throw fieldError('until', 'must be after since');
    const subscription = await this.deps.subscriptions.existing(tenantId, id);
    requireActive(subscription);
    const { webhooks } = this.deps;
    const count =
      (await webhooks.countDeadLetters(tenantId, id, since, until)) +
      (window.missed ? await webhooks.countMissed(tenantId, id, since, until) : 0);
    if (count > MAX_RECOVER) {
      throw fieldError(
        'since',
        `the window holds ${count} deliveries to recover; at most ${MAX_RECOVER} are recovered per request: narrow it`,
      );
    }
    if (count === 0) return { queued: 0 };
    const queued = await this.deps.database.withTransaction(async () => {
      let total = 0;
      let afterId: string | null = null;
      for (;;) {
        const batch = await webhooks.deadLetters(tenantId, id, {
          since,
          until,
          afterId,
          limit: RECOVER_BATCH,
        });
        if (batch.length === 0) break;
        await this.deps.events.requeue(tenantId, id, batch);
        total += batch.length;
        afterId = batch[batch.length - 1].id;
      }
      if (!window.missed) return total;
      // Events emitted while it was paused, in their order, each with its next sequence.
      const missed = await webhooks.takeMissed(tenantId, id, since, until);
      return total + (await this.deps.events.queueMissed(tenantId, id, missed)).length;
    });
    return { queued };
  }

  /**
   * The portal's "enable and recover what was missed": enables a paused subscription and, in the
   * same transaction, recovers (`missed` included) everything since it was paused, so the missed
   * events take their sequences before any new one. 409 `subscription_active` when it is not
   * paused; a deleted one is 404.
   */
  async enableAndRecover(tenantId: string, id: string): Promise<{ queued: number }> {
    return this.deps.database.withTransaction(async () => {
      const subscription = await this.deps.subscriptions.live(tenantId, id);
      if (subscription.active || subscription.pausedAt === null) {
        throw conflict('The subscription is not paused.', 'subscription_active');
      }
      const since = subscription.pausedAt;
      await this.deps.subscriptions.update(tenantId, id, { active: true });
      return this.recover(tenantId, id, { since, missed: true });
    });
  }

  /** A new pending row for the same event, attempts from 1; the original is untouched. */
  async redeliver(
    tenantId: string,
    id: string,
    deliveryId: string,
  ): Promise<{ deliveryId: string; eventId: string; status: 'pending' }> {
    const subscription = await this.deps.subscriptions.existing(tenantId, id);
    const original = await this.deps.webhooks.findDelivery(tenantId, id, deliveryId);
    if (!original) throw notFound('Delivery');
    if (!mayRedeliver(original.status)) {
      throw conflict('An attempt of this delivery is running.', 'in_flight');
    }
    requireActive(subscription);
    const [newDeliveryId] = await this.deps.database.withTransaction(() =>
      this.deps.events.requeue(tenantId, id, [original]),
    );
    return { deliveryId: newDeliveryId, eventId: original.eventId, status: 'pending' };
  }

  /**
   * A test event: `webhook.test`, or a sample of `eventType` (any subscribable type, realistic
   * data with ids that name no row); to one subscription (404 unknown or deleted, 422 paused), or
   * to every active one whatever its events list. Marked as a test in its envelope; the
   * subscriptions are not modified, whatever the outcome.
   */
  async fireTest(
    tenantId: string,
    options: { subscriptionId?: string; eventType?: SubscribableEventType },
  ): Promise<{ eventId: string; deliveries: number }> {
    const { subscriptionId, eventType } = options;
    let targets: string[];
    if (subscriptionId !== undefined) {
      const subscription = await this.deps.subscriptions.live(tenantId, subscriptionId);
      if (!subscription.active) {
        throw fieldError('subscriptionId', 'the subscription is paused; re-enable it first');
      }
      targets = [subscription.id];
    } else {
      const subscriptions = await this.deps.webhooks.liveSubscriptions(tenantId);
      targets = subscriptions.filter((s) => s.active).map((s) => s.id);
    }
    return this.deps.database.withTransaction(async () => {
      const type = eventType ?? 'webhook.test';
      const data =
        eventType === undefined
          ? { subscriptionId: subscriptionId ?? null, message: TEST_MESSAGE }
          : sampleEventData(eventType, this.deps.clock.now());
      const eventId = await this.deps.events.record(
        tenantId,
        type,
        data as EventData<typeof type>,
        {
          test: true,
        },
      );
      const queued = await this.deps.events.queueTest(tenantId, eventId, type, targets);
      return { eventId, deliveries: queued.length };
    });
  }
}
