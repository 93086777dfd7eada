import type { Updateable } from 'kysely';
import type { Database } from '../db/database.ts';
import { DELIVERIES_CHANNEL, type Notifier } from '../db/notifier.ts';
import type { WebhookSubscriptionsTable } from '../db/schema.ts';
import type { AddressGuard } from '../domain/address-guard.ts';
import { splitPassword } from '../domain/destinations.ts';
import { FilterTargets } from '../domain/filter-catalog.ts';
import {
  DEFAULT_MAX_CONCURRENCY,
  INITIAL_CONCURRENCY,
  type Ordering,
} from '../domain/flow-control.ts';
import { checkFilter, type PayloadFilter } from '../domain/payload-filter.ts';
import { effectiveWebhookEndpointCap, isTier, TIERS } from '../domain/plans.ts';
import {
  type ClientCertificate,
  NO_RECEIVER_SECRETS,
  type ReceiverAuthScheme,
} from '../domain/receiver-auth.ts';
import { retryScheduleFaults } from '../domain/retry-schedule.ts';
import {
  dropRetiredPairs,
  newSigningKey,
  newSigningKeyPair,
  retireKey,
  servesStandardWebhooks,
} from '../domain/signing.ts';
import type { PayloadForm } from '../domain/thin-payload.ts';
import type { Transformation } from '../domain/transformation.ts';
import { mayMove, subscriptionMove } from '../domain/webhook-moves.ts';
import { type Clock, nowIso } from '../lib/clock.ts';
import { firstIdAt, newId } from '../lib/ids.ts';
import { parseStoredJson } from '../lib/json.ts';
import { conflict, fieldError, forbidden, notFound, validationFailed } from '../lib/problems.ts';
import type { SecretBox } from '../lib/secret-box.ts';
import type { TenantsRepository } from '../repositories/tenants-repository.ts';
import type { SubscriptionRow, WebhooksRepository } from '../repositories/webhooks-repository.ts';
import type { TransformationRunner } from '../transformations/runner.ts';
import type { EventsService } from './events-service.ts';
import { owningTenant } from './owner.ts';
import {
  type CheckedTarget,
  originOf,
  receiverSecretsFor,
  SubscriptionSecrets,
} from './subscription-secrets.ts';
import {
  NO_DELIVERIES,
  type Subscription,
  type SubscriptionActivity,
  storedFilterOf,
  toSubscription,
} from './subscription-view.ts';

/** What creating a subscription takes. */
export interface CreateSubscriptionInput {
  url: string;
  events: string[];
  standardWebhooks?: boolean;
  asymmetricSignatures?: boolean;
  maxConcurrency?: number;
  maxPerSecond?: number | null;
  ordering?: Ordering;
  propagateTraceContext?: boolean;
  filter?: PayloadFilter | null;
  payload?: PayloadForm;
  transformation?: Transformation | null;
  retrySchedule?: string[] | null;
  headers?: Record<string, string> | null;
  auth?: ReceiverAuthScheme | null;
  clientCertificate?: ClientCertificate | null;
}

/** PATCH: what is given changes; `active` pauses (false) or re-enables (true). */
export interface UpdateSubscriptionInput {
  url?: string;
  events?: string[];
  standardWebhooks?: boolean;
  asymmetricSignatures?: boolean;
  maxConcurrency?: number;
  maxPerSecond?: number | null;
  ordering?: Ordering;
  propagateTraceContext?: boolean;
  filter?: PayloadFilter | null;
  payload?: PayloadForm;
  transformation?: Transformation | null;
  retrySchedule?: string[] | null;
  headers?: Record<string, string> | null;
  auth?: ReceiverAuthScheme | null;
  clientCertificate?: ClientCertificate | null;
  active?: boolean;
}

const DAY_MS = 86_400_000;

/**
 * 422 naming each fault of the filter by its path, held against the event catalog too when the
 * subscription's `events` are known.
 */
function assertFilter(filter: PayloadFilter | null, events?: readonly string[]): void {
  const errors = checkFilter(filter, events && new FilterTargets(events));
  if (Object.keys(errors).length > 0) throw validationFailed(errors);
}

/** A filter as stored: checked (see assertFilter), then its JSON text. */
function storedFilter(filter: PayloadFilter | null, events?: readonly string[]): string | null {
  assertFilter(filter, events);
  return filter === null ? null : JSON.stringify(filter);
}

/** A retry schedule as stored: checked (422 keyed `retrySchedule[.<index>]`), then its JSON. */
function storedRetrySchedule(waits: string[] | null): string | null {
  if (waits === null) return null;
  const errors = retryScheduleFaults(waits);
  if (Object.keys(errors).length > 0) throw validationFailed(errors);
  return JSON.stringify(waits);
}

const ASYMMETRIC_NEEDS_STANDARD =
  'needs standardWebhooks: true (v1a signatures travel in the webhook-signature header)';

/** Subscriptions: their settings, state, keys and targets (deliveries: DeliveriesService). */
interface WebhooksServiceDeps {
  database: Database;
  webhooks: WebhooksRepository;
  tenants: TenantsRepository;
  events: EventsService;
  notifier: Notifier;
  guard: AddressGuard;
  secrets: SecretBox;
  clock: Clock;
  keyOverlapMs: number;
  transformations: TransformationRunner;
}

export class WebhooksService {
  private readonly sealed: SubscriptionSecrets;

  constructor(private readonly deps: WebhooksServiceDeps) {
    this.sealed = new SubscriptionSecrets(deps.secrets);
  }

  async list(tenantId: string): Promise<Subscription[]> {
    return this.shown(tenantId, await this.deps.webhooks.listSubscriptions(tenantId));
  }

  /** One subscription, deleted or not; 404 for another tenant's or an unknown id. */
  async get(tenantId: string, id: string): Promise<Subscription> {
    return this.shownOne(tenantId, await this.existing(tenantId, id));
  }

  /** Subscriptions as the API shows them, with their deliveries' activity. */
  private async shown(tenantId: string, rows: SubscriptionRow[]): Promise<Subscription[]> {
    const now = this.deps.clock.now();
    const ids = rows.map((row) => row.id);
    const since = firstIdAt('dlv', now.getTime() - DAY_MS);
    const recent = await this.deps.webhooks.recentCounts(tenantId, ids, since);
    const inFlight = await this.deps.webhooks.inFlightCounts(tenantId, ids);
    const activity = new Map<string, SubscriptionActivity>();
    const of = (id: string) => {
      let entry = activity.get(id);
      if (entry === undefined) {
        entry = { last24h: { ...NO_DELIVERIES }, inFlight: 0 };
        activity.set(id, entry);
      }
      return entry;
    };
    for (const { subscriptionId, status, n } of recent) {
      const { last24h } = of(subscriptionId);
      if (status === 'success') last24h.succeeded += Number(n);
      else if (status === 'dead_letter') last24h.deadLettered += Number(n);
      else last24h.pending += Number(n);
    }
    for (const { subscriptionId, n } of inFlight) of(subscriptionId).inFlight = Number(n);
    const at = now.toISOString();
    return rows.map((row) => toSubscription(row, at, activity.get(row.id)));
  }

  /** One subscription as the API shows it. */
  private async shownOne(tenantId: string, row: SubscriptionRow): Promise<Subscription> {
    const [subscription] = await this.shown(tenantId, [row]);
    return subscription;
  }

  /**
   * 403 when the plan has no webhooks or the endpoint cap is full (checked before the body's
   * 422s, as everywhere); 422 when the URL is not a public HTTPS endpoint.
   */
  async create(
    tenantId: string,
    input: CreateSubscriptionInput,
    target?: CheckedTarget,
  ): Promise<{ subscription: Subscription; signingKey: string }> {
    const checked = target ?? (await this.checkTarget(tenantId, input.url));
    await this.checkTokenUrl(input.auth);
    const filter = storedFilter(input.filter ?? null, input.events);
    const transformation = await this.storedTransformation(tenantId, input.transformation ?? null);
    const retrySchedule = storedRetrySchedule(input.retrySchedule ?? null);
    const secrets = receiverSecretsFor(
      checked.url,
      input,
      NO_RECEIVER_SECRETS,
      true,
      this.deps.clock.now(),
    );
    if (input.asymmetricSignatures === true && input.standardWebhooks !== true) {
      throw fieldError('asymmetricSignatures', ASYMMETRIC_NEEDS_STANDARD);
    }
    const id = newId('whs');
    const signingKey = newSigningKey();
    const pair = input.asymmetricSignatures === true ? newSigningKeyPair() : null;
    const urlPassword = this.sealed.newPassword(checked, id);
    const row = await this.deps.database.withTransaction(async () => {
      await this.assertRoomForEndpoint(tenantId, true);
      return this.deps.webhooks.insertSubscription({
        id,
        tenantId,
        url: checked.url,
        urlPassword,
        events: JSON.stringify([...new Set(input.events)]),
        active: true,
        pausedAt: null,
        pauseReason: null,
        deletedAt: null,
        consecutiveFailures: 0,
        clientErrorRun: 0,
        clientErrorRunSince: null,
        lastSuccessAt: null,
        lastFailureAt: null,
        signingKey: this.deps.secrets.encrypt(signingKey, id),
        retiredSigningKeys: '[]',
        standardWebhooks: input.standardWebhooks === true,
        asymmetricSignatures: pair !== null,
        signingKeyPair: pair === null ? null : this.deps.secrets.encrypt(pair.secretKey, id),
        publicKey: pair?.publicKey ?? null,
        maxConcurrency: input.maxConcurrency ?? DEFAULT_MAX_CONCURRENCY,
        concurrencyLimit: INITIAL_CONCURRENCY,
        backedOff: false,
        maxPerSecond: input.maxPerSecond ?? null,
        ordering: input.ordering ?? 'none',
        propagateTraceContext: input.propagateTraceContext === true,
        filter,
        payload: input.payload ?? 'full',
        transformation,
        retrySchedule,
        ...this.sealed.receiverAuth(secrets, id),
        createdAt: nowIso(this.deps.clock),
      });
    });
    return { subscription: toSubscription(row, nowIso(this.deps.clock)), signingKey };
  }

  /**
   * PATCH: a new URL (checked like at creation, by `checkUrl` before the transaction), events,
   * Standard Webhooks headers (409 `signing_key_rotation_required` while the current key predates
   * the form they need), pause or re-enable. A deleted subscription is 404.
   */
  async update(
    tenantId: string,
    id: string,
    input: UpdateSubscriptionInput,
    target?: CheckedTarget,
  ): Promise<Subscription> {
    const checked =
      input.url === undefined ? undefined : (target ?? (await this.checkUrl(input.url)));
    await this.checkTokenUrl(input.auth);
    const filter = input.filter === undefined ? undefined : storedFilter(input.filter);
    const transformation =
      input.transformation === undefined
        ? undefined
        : await this.storedTransformation(tenantId, input.transformation);
    const retrySchedule =
      input.retrySchedule === undefined ? undefined : storedRetrySchedule(input.retrySchedule);
    const now = nowIso(this.deps.clock);
    const row = await this.deps.database.withTransaction(async () => {
      const current = await this.deps.webhooks.lockLiveSubscription(tenantId, id);
      if (!current) throw notFound('Webhook subscription');
      if (
        input.standardWebhooks === true &&
        !servesStandardWebhooks(this.deps.secrets.decrypt(current.signingKey, id))
      ) {
        throw conflict(
          'This signing key predates the form Standard Webhooks verifiers need: rotate the key (POST /api/v1/webhooks/{id}/rotate-key), then turn standardWebhooks on.',
          'signing_key_rotation_required',
        );
      }
      const standard = input.standardWebhooks ?? current.standardWebhooks;
      const asymmetric = input.asymmetricSignatures ?? current.asymmetricSignatures;
      if (asymmetric && !standard) {
        throw fieldError('asymmetricSignatures', ASYMMETRIC_NEEDS_STANDARD);
      }
      const patch: Updateable<WebhookSubscriptionsTable> = {};
      if (asymmetric !== current.asymmetricSignatures) {
        const pair = asymmetric ? newSigningKeyPair() : null;
        patch.asymmetricSignatures = asymmetric;
        patch.signingKeyPair = pair === null ? null : this.deps.secrets.encrypt(pair.secretKey, id);
        patch.publicKey = pair?.publicKey ?? null;
        if (!asymmetric) patch.retiredSigningKeys = dropRetiredPairs(current.retiredSigningKeys);
      }
      if (checked) {
        patch.url = checked.url;
        patch.urlPassword = this.sealed.keptPassword(current, checked, id);
      }
      if (input.events) patch.events = JSON.stringify([...new Set(input.events)]);
      // The filter is for the events the subscription will list: either may be what changed.
      if (input.filter !== undefined || input.events) {
        assertFilter(
          input.filter !== undefined ? input.filter : storedFilterOf(current),
          input.events ?? parseStoredJson<string[]>(current.events),
        );
      }
      if (input.standardWebhooks !== undefined) patch.standardWebhooks = input.standardWebhooks;
      if (input.maxConcurrency !== undefined) patch.maxConcurrency = input.maxConcurrency;
      if (input.maxPerSecond !== undefined) patch.maxPerSecond = input.maxPerSecond;
      if (input.ordering !== undefined) patch.ordering = input.ordering;
      if (input.propagateTraceContext !== undefined) {
        patch.propagateTraceContext = input.propagateTraceContext;
      }
      if (filter !== undefined) patch.filter = filter;
      if (input.payload !== undefined) patch.payload = input.payload;
      if (transformation !== undefined) patch.transformation = transformation;
      if (retrySchedule !== undefined) patch.retrySchedule = retrySchedule;
      if (
        checked ||
        input.headers !== undefined ||
        input.auth !== undefined ||
        input.clientCertificate !== undefined
      ) {
        const url = checked?.url ?? current.url;
        const secrets = receiverSecretsFor(
          url,
          input,
          this.sealed.openReceiverAuth(current),
          originOf(url) === originOf(current.url),
          this.deps.clock.now(),
        );
        Object.assign(patch, this.sealed.receiverAuth(secrets, id));
      }
      if (input.active === true && mayMove(current, 'enable')) {
        Object.assign(patch, subscriptionMove('enable', now));
        await this.deps.notifier.publish(DELIVERIES_CHANNEL);
      } else if (input.active === false && mayMove(current, 'pause')) {
        Object.assign(patch, subscriptionMove('pause', now));
      }
      if (Object.keys(patch).length === 0) return current;
      if (input.ordering !== undefined && input.ordering !== current.ordering) {
        await this.deps.webhooks.orderQueued(tenantId, id, input.ordering);
      }
      return this.deps.webhooks.updateSubscription(tenantId, id, patch);
    });
    if (!row) throw notFound('Webhook subscription');
    return this.shownOne(tenantId, row);
  }

  /**
   * What registering `url` needs before any transaction: the plan's room (403, before the body's
   * 422s as everywhere; counted again under a lock by `create`), then the URL's check, which
   * resolves its host (422). Run it outside any transaction: resolving takes up to
   * WEBHOOK_DNS_TIMEOUT, and a transaction open that long holds SQLite's write lock.
   */
  async checkTarget(tenantId: string, url: string): Promise<CheckedTarget> {
    await this.assertRoomForEndpoint(tenantId, false);
    return this.checkUrl(url);
  }

  /**
   * An OAuth2 token endpoint passes the address guard as the subscription URL does, and is HTTPS
   * (422 `auth.tokenUrl`): outside any transaction, like checkUrl.
   */
  private async checkTokenUrl(auth: ReceiverAuthScheme | null | undefined): Promise<void> {
    if (auth?.type !== 'oauth2_client_credentials') return;
    // The scheme first, as the URL parser reads it (`HTTPS:` is https): a token endpoint is never
    // a broker, so the guard's broker hints do not apply.
    const url = URL.canParse(auth.tokenUrl) ? new URL(auth.tokenUrl) : null;
    if (url === null) throw fieldError('auth.tokenUrl', 'must be a valid https URL');
    if (url.protocol !== 'https:') throw fieldError('auth.tokenUrl', 'must use https');
    const check = await this.deps.guard.checkUrl(auth.tokenUrl);
    if (!check.ok) throw fieldError('auth.tokenUrl', check.reason);
  }

  /**
   * A transformation as stored (its code), once it compiles and defines `handler` in the
   * sandbox: else 422 on `transformation.code` with the compiler's message and line. Outside any
   * transaction, like checkUrl: the sandbox may take up to its time cap.
   */
  private async storedTransformation(
    tenantId: string,
    transformation: Transformation | null,
  ): Promise<string | null> {
    if (transformation === null) return null;
    const fault = await this.deps.transformations.faultOf(tenantId, transformation.code);
    if (fault !== null) throw fieldError('transformation.code', fault);
    return transformation.code;
  }

  /** The URL's check alone (a new URL for an existing endpoint): outside any transaction. */
  async checkUrl(url: string): Promise<CheckedTarget> {
    const check = await this.deps.guard.checkUrl(url);
    if (!check.ok) throw fieldError('url', check.reason);
    const { shown, password } = splitPassword(url);
    return { url: shown, password };
  }

  /**
   * 403 unless the plan has webhooks and room for one more endpoint. `locked`: the tenant row is
   * held until the transaction ends, so that concurrent registrations count one after another.
   */
  private async assertRoomForEndpoint(tenantId: string, locked: boolean): Promise<void> {
    const tenant = locked
      ? await this.deps.tenants.lockForQuota(tenantId)
      : await this.deps.tenants.findById(tenantId);
    if (!tenant) throw notFound('Tenant');
    if (!isTier(tenant.tier) || !TIERS[tenant.tier].webhooks) {
      throw forbidden(`The ${tenant.tier} plan does not include webhooks.`, 'feature_off_for_tier');
    }
    const cap = effectiveWebhookEndpointCap(tenant);
    if ((await this.deps.webhooks.countLive(tenantId)) >= cap) {
      throw forbidden(
        `The plan allows ${cap} webhook endpoints; delete one first.`,
        'webhook_quota_exceeded',
      );
    }
  }

  /** Soft delete: inactive, `pausedAt` now; history kept. A deleted one is gone (404). */
  async remove(tenantId: string, id: string): Promise<void> {
    const now = nowIso(this.deps.clock);
    // Conditional: of concurrent deletes, one finds the subscription live; the others 404.
    const deleted = await this.deps.webhooks.updateSubscription(
      tenantId,
      id,
      subscriptionMove('delete', now),
      { onlyLive: true },
    );
    if (!deleted) throw notFound('Webhook subscription');
  }

  /**
   * A new key; the one current until now keeps signing (another v1) for the overlap, and so does
   * every key retired before it, each until the expiry promised for it.
   */
  async rotateKey(
    tenantId: string,
    id: string,
  ): Promise<{
    subscription: Subscription;
    signingKey: string;
    legacySigningKeyExpiresAt: string;
  }> {
    const signingKey = newSigningKey();
    const now = this.deps.clock.now();
    const expiresAt = new Date(now.getTime() + this.deps.keyOverlapMs).toISOString();
    // Under the row's lock: the key retired is the one current now, so of two concurrent
    // rotations the second keeps the first's new key signing.
    const row = await this.deps.database.withTransaction(async () => {
      const current = await this.deps.webhooks.lockLiveSubscription(tenantId, id);
      if (!current) throw notFound('Webhook subscription');
      // With asymmetric signatures the key pair rotates too, the old one signing as long.
      const pair = current.asymmetricSignatures ? newSigningKeyPair() : null;
      return this.deps.webhooks.updateSubscription(tenantId, id, {
        signingKey: this.deps.secrets.encrypt(signingKey, id),
        retiredSigningKeys: retireKey(
          current.retiredSigningKeys,
          current.signingKey,
          expiresAt,
          now.toISOString(),
          pair === null ? null : current.signingKeyPair,
        ),
        ...(pair !== null
          ? {
              signingKeyPair: this.deps.secrets.encrypt(pair.secretKey, id),
              publicKey: pair.publicKey,
            }
          : {}),
      });
    });
    if (!row) throw notFound('Webhook subscription');
    return {
      subscription: await this.shownOne(tenantId, row),
      signingKey,
      legacySigningKeyExpiresAt: expiresAt,
    };
  }

  /** The tenant of a subscription, for the operator CLI, which names it by id alone. */
  tenantOf(id: string): Promise<string> {
    return owningTenant(
      { findTenantOf: (subscription) => this.deps.webhooks.findSubscriptionTenant(subscription) },
      id,
      'Webhook subscription',
    );
  }

  /**
   * Admin re-enable: active again, counters cleared (an active one's too); its pending deliveries
   * resume.
   */
  async enable(id: string): Promise<Subscription> {
    const tenantId = await this.tenantOf(id);
    const now = nowIso(this.deps.clock);
    const row = await this.deps.database.withTransaction(async () => {
      const updated = await this.deps.webhooks.updateSubscription(
        tenantId,
        id,
        subscriptionMove('enable', now),
        { onlyLive: true },
      );
      await this.deps.notifier.publish(DELIVERIES_CHANNEL);
      return updated;
    });
    if (!row) throw notFound('Webhook subscription');
    return this.shownOne(tenantId, row);
  }

  /** The tenant's subscription, deleted or not (listing history, redeliver). */
  async existing(tenantId: string, id: string): Promise<SubscriptionRow> {
    const row = await this.deps.webhooks.findSubscription(tenantId, id);
    if (!row) throw notFound('Webhook subscription');
    return row;
  }

  /** The tenant's subscription unless deleted (DELETE, rotate-key, enable answer 404 for those). */
  async live(tenantId: string, id: string): Promise<SubscriptionRow> {
    const row = await this.existing(tenantId, id);
    if (row.deletedAt !== null) throw notFound('Webhook subscription');
    return row;
  }
}
