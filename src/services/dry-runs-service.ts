import { deliveryBody, type StoredEvent } from '../domain/delivery-request.ts';
import { FilterTargets } from '../domain/filter-catalog.ts';
import {
  checkFilter,
  compileFilter,
  type FilterableEvent,
  type PayloadFilter,
} from '../domain/payload-filter.ts';
import type { PayloadForm } from '../domain/thin-payload.ts';
import type { TransformationResult } from '../domain/transformation.ts';
import type { Clock } from '../lib/clock.ts';
import { parseStoredJson } from '../lib/json.ts';
import { fieldError, notFound, validationFailed } from '../lib/problems.ts';
import type { SubscriptionRow, WebhooksRepository } from '../repositories/webhooks-repository.ts';
import {
  type TransformationRunner,
  type TransformedSubscription,
  transformedRequest,
} from '../transformations/runner.ts';

/** A filter's dry run: against one event, or against a subscription's recent ledger. */
export interface FilterTestInput {
  filter: PayloadFilter | null;
  event?: FilterableEvent;
  subscriptionId?: string;
}

export interface FilterTestResult {
  matches: boolean;
  events?: Array<{ id: string; type: string; sequence: number; matches: boolean }>;
}

/** How many of a subscription's latest ledger events a dry run (filter, transformation) takes. */
const DRY_RUN_EVENTS = 50;

/** A transformation's dry run: over one event, or over a subscription's recent ledger. */
export interface TransformationTestInput {
  code: string;
  event?: FilterableEvent;
  subscriptionId?: string;
}

/** One answer of a transformation's dry run: the request as it would go, or why it would fail. */
type DryRunAnswer = { result: TransformationResult } | { error: string };

export type TransformationTestResult =
  | DryRunAnswer
  | { events: Array<{ id: string; type: string; sequence: number } & DryRunAnswer> };

/** A sample event's dry run has no subscription: its id and destination are these. */
const SAMPLE_EVENT_ID = 'evt_dry_run';
const SAMPLE_URL = 'https://receiver.example/webhooks';

/** A dry run takes an event or a subscription's ledger, exactly one: else its faults. */
function sourceFaults(input: {
  event?: unknown;
  subscriptionId?: string;
}): Record<string, string[]> {
  if (input.event !== undefined && input.subscriptionId !== undefined) {
    return { subscriptionId: ['give an event or a subscriptionId, not both'] };
  }
  if (input.event === undefined && input.subscriptionId === undefined) {
    return { event: ['give an event ({type, data}) or a subscriptionId'] };
  }
  return {};
}

/**
 * The dry runs of a subscription's settings: a payload filter and a transformation, each over one
 * event or over a subscription's recent ledger. Nothing is stored or sent; each answers as the
 * setting would decide at this moment.
 */
export class DryRunsService {
  constructor(
    private readonly deps: {
      webhooks: WebhooksRepository;
      transformations: TransformationRunner;
      clock: Clock;
    },
  ) {}

  /**
   * The dry run of a filter (422 as when it is set, but for a sample event only when it is not
   * well-formed): whether it takes `event`, or which of the
   * subscription's last DRY_RUN_EVENTS ledger events (oldest first) it would have taken,
   * `matches` telling whether any. Exactly one of the two is given.
   */
  async testFilter(tenantId: string, input: FilterTestInput): Promise<FilterTestResult> {
    // Held against the catalog of the subscription's events; a sample event is only matched (a
    // filter no event of its type can match answers `matches: false` for it, as for any).
    let types: readonly string[] | undefined;
    if (input.event === undefined && input.subscriptionId !== undefined) {
      types = parseStoredJson<string[]>(
        (await this.subscription(tenantId, input.subscriptionId)).events,
      );
    }
    const errors = {
      ...checkFilter(input.filter, types && new FilterTargets(types)),
      ...sourceFaults(input),
    };
    if (Object.keys(errors).length > 0) throw validationFailed(errors);
    const matcher = compileFilter(input.filter);
    if (input.event !== undefined) return { matches: matcher(input.event) };
    const rows = await this.deps.webhooks.ledger(tenantId, input.subscriptionId as string, {
      after: 0,
      limit: DRY_RUN_EVENTS,
      newestFirst: true,
    });
    const events = rows.reverse().map((row) => ({
      id: row.eventId,
      type: row.type,
      sequence: row.sequence,
      matches: matcher({ type: row.type, data: parseStoredJson<unknown>(row.data) }),
    }));
    return { matches: events.some((event) => event.matches), events };
  }

  /**
   * The dry run of a transformation (422 on `code` as when it is set): what it makes of `event`
   * (a full body, as a subscription made now would get it), or of each of the subscription's last
   * DRY_RUN_EVENTS ledger events (oldest first) as its deliveries would go now, with its URL, its
   * body form and its receiver authentication. Nothing is sent; the answers are what a delivery
   * at this second sends (see transformedRequest).
   */
  async testTransformation(
    tenantId: string,
    input: TransformationTestInput,
  ): Promise<TransformationTestResult> {
    const errors = sourceFaults(input);
    if (Object.keys(errors).length > 0) throw validationFailed(errors);
    const code = input.code;
    const fault = await this.deps.transformations.faultOf(tenantId, code);
    if (fault !== null) throw fieldError('code', fault);
    const created = Math.floor(this.deps.clock.now().getTime() / 1000);
    const answer = async (
      subscription: TransformedSubscription,
      event: StoredEvent,
      form: PayloadForm,
    ): Promise<DryRunAnswer> => {
      const body = deliveryBody(event, created, form);
      const outcome = await transformedRequest(
        this.deps.transformations,
        subscription,
        event.type,
        body,
        created,
      );
      return outcome.ok ? { result: outcome.result } : { error: outcome.error };
    };
    if (input.event !== undefined) {
      const sample = {
        tenantId,
        url: SAMPLE_URL,
        receiverAuth: null,
        receiverSecrets: null,
        transformation: code,
      };
      return answer(
        sample,
        {
          id: SAMPLE_EVENT_ID,
          type: input.event.type,
          data: JSON.stringify(input.event.data ?? null),
          isTest: false,
          sequence: null,
        },
        'full',
      );
    }
    const row = await this.subscription(tenantId, input.subscriptionId as string);
    const rows = await this.deps.webhooks.ledger(tenantId, row.id, {
      after: 0,
      limit: DRY_RUN_EVENTS,
      newestFirst: true,
    });
    // All at once: the sandbox takes them in a batch.
    const events = await Promise.all(
      rows.reverse().map(async (entry) => {
        const event = {
          id: entry.eventId,
          type: entry.type,
          data: entry.data,
          isTest: false,
          sequence: entry.sequence,
        };
        const one = await answer({ ...row, transformation: code }, event, row.payload);
        return { id: entry.eventId, type: entry.type, sequence: entry.sequence, ...one };
      }),
    );
    return { events };
  }

  /** The tenant's subscription, deleted or not. */
  private async subscription(tenantId: string, id: string): Promise<SubscriptionRow> {
    const row = await this.deps.webhooks.findSubscription(tenantId, id);
    if (!row) throw notFound('Webhook subscription');
    return row;
  }
}
