import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import { Notifier } from '../db/notifier.ts';
import { AddressGuard, type Resolver } from '../domain/address-guard.ts';
import type { Clock } from '../lib/clock.ts';
import { SecretBox } from '../lib/secret-box.ts';
import { BookingsRepository } from '../repositories/bookings-repository.ts';
import { ClientsRepository } from '../repositories/clients-repository.ts';
import { ErasuresRepository } from '../repositories/erasures-repository.ts';
import { EventsRepository } from '../repositories/events-repository.ts';
import { IdempotencyRepository } from '../repositories/idempotency-repository.ts';
import { InstanceSettingsRepository } from '../repositories/instance-settings-repository.ts';
import { LibraryRepository } from '../repositories/library-repository.ts';
import { MembersRepository } from '../repositories/members-repository.ts';
import { NotificationsRepository } from '../repositories/notifications-repository.ts';
import { PaymentsRepository } from '../repositories/payments-repository.ts';
import { PortalSessionsRepository } from '../repositories/portal-sessions-repository.ts';
import { RetentionRepository } from '../repositories/retention-repository.ts';
import { TenantsRepository } from '../repositories/tenants-repository.ts';
import { TokensRepository } from '../repositories/tokens-repository.ts';
import { TripsRepository } from '../repositories/trips-repository.ts';
import { WebhooksRepository } from '../repositories/webhooks-repository.ts';
import { TransformationRunner } from '../transformations/runner.ts';
import { AuthCache } from './auth-cache.ts';
import { BookingsService } from './bookings-service.ts';
import { ClientsService } from './clients-service.ts';
import { DeliveriesService } from './deliveries-service.ts';
import { DryRunsService } from './dry-runs-service.ts';
import { ErasuresService } from './erasures-service.ts';
import { EventsService } from './events-service.ts';
import { IdempotencyService } from './idempotency-service.ts';
import { LibraryService } from './library-service.ts';
import { PaymentsService } from './payments-service.ts';
import { PortalService } from './portal-service.ts';
import { RetentionService } from './retention-service.ts';
import { SecretKeyCheck } from './secret-key-check.ts';
import { TenantsService } from './tenants-service.ts';
import { TokensService } from './tokens-service.ts';
import { TripsService } from './trips-service.ts';
import { WebhooksService } from './webhooks-service.ts';

/** What the HTTP app, the worker, the CLI and the demo call; none of them sees a repository. */
export interface Services {
  authCache: AuthCache;
  tenants: TenantsService;
  tokens: TokensService;
  trips: TripsService;
  bookings: BookingsService;
  payments: PaymentsService;
  clients: ClientsService;
  library: LibraryService;
  events: EventsService;
  /** A person's data redacted on request (run by the worker). */
  erasures: ErasuresService;
  idempotency: IdempotencyService;
  webhooks: WebhooksService;
  /** The dry runs of a filter and of a transformation. */
  dryRuns: DryRunsService;
  deliveries: DeliveriesService;
  /** Webhook portal links and the browser sessions they open. */
  portal: PortalService;
  /** The delivery worker's claims and outcomes. */
  /** Deletes what RETENTION_DAYS no longer keeps (run by the worker). */
  retention: RetentionService;
  /** Wakes workers and drops cached auth across processes (pg_notify, or in-process). */
  notifier: Notifier;
  /** Seals signing keys at rest (SECRET_KEY). */
  secrets: SecretBox;
  /** Refuses a SECRET_KEY that cannot open what the database holds (run at start-up). */
  secretKeyCheck: SecretKeyCheck;
  /** Decides which webhook endpoints may be registered and connected to. */
  addressGuard: AddressGuard;
  /** The sandbox subscriptions' transformations are checked and run in (one thread). */
  transformations: TransformationRunner;
}

export type Repositories = ReturnType<typeof createRepositories>;

/**
 * How long another process's revocation or tenant change can take to reach this one when no
 * notification arrives (SQLite with the CLI, or a lost LISTEN connection); changes made through
 * this process apply at once, and on PostgreSQL other serving processes hear of them at once.
 */
export const AUTH_CACHE_TTL_MS = 2_000;

function createRepositories(database: Database) {
  return {
    tenants: new TenantsRepository(database),
    members: new MembersRepository(database),
    tokens: new TokensRepository(database),
    trips: new TripsRepository(database),
    bookings: new BookingsRepository(database),
    payments: new PaymentsRepository(database),
    clients: new ClientsRepository(database),
    library: new LibraryRepository(database),
    events: new EventsRepository(database),
    erasures: new ErasuresRepository(database),
    notifications: new NotificationsRepository(database),
    idempotency: new IdempotencyRepository(database),
    webhooks: new WebhooksRepository(database),
    portalSessions: new PortalSessionsRepository(database),
    retention: new RetentionRepository(database),
    settings: new InstanceSettingsRepository(database),
  };
}

/**
 * The one place that wires repositories into services; the HTTP app, CLI and tests share it. The
 * repositories are returned too, for tests and benchmarks that inspect rows directly.
 */
export function createServices(
  config: Config,
  database: Database,
  clock: Clock,
  onBackgroundError: (error: unknown) => void,
  options: { secretKey: string | null; resolver?: Resolver; keySource?: string },
): { services: Services; repositories: Repositories } {
  const repositories = createRepositories(database);
  const notifier = new Notifier(database);
  const events = new EventsService({
    events: repositories.events,
    webhooks: repositories.webhooks,
    notifier,
    clock,
  });
  const secrets = new SecretBox(options.secretKey);
  const addressGuard = new AddressGuard({
    allowPrivate: config.webhook.allowPrivateTargets,
    timeoutMs: config.webhook.dnsTimeoutMs,
    resolver: options.resolver,
  });
  const authCache = new AuthCache(AUTH_CACHE_TTL_MS);
  const transformations = new TransformationRunner();
  const webhooks = new WebhooksService({
    transformations,
    database,
    webhooks: repositories.webhooks,
    tenants: repositories.tenants,
    events,
    notifier,
    guard: addressGuard,
    secrets,
    clock,
    keyOverlapMs: config.webhook.keyOverlapMs,
  });
  const services: Services = {
    authCache,
    events,
    erasures: new ErasuresService({
      database,
      erasures: repositories.erasures,
      events,
      clock,
    }),
    tenants: new TenantsService({
      tenants: repositories.tenants,
      members: repositories.members,
      notifications: repositories.notifications,
      authCache,
      notifier,
      clock,
    }),
    tokens: new TokensService({
      tokens: repositories.tokens,
      tenants: repositories.tenants,
      members: repositories.members,
      clock,
      env: config.deploymentEnv,
      cache: authCache,
      notifier,
      onBackgroundError,
    }),
    trips: new TripsService({
      database,
      trips: repositories.trips,
      tenants: repositories.tenants,
      clients: repositories.clients,
      library: repositories.library,
      events,
      clock,
    }),
    bookings: new BookingsService({
      database,
      bookings: repositories.bookings,
      trips: repositories.trips,
      events,
      clock,
      storefrontBaseUrl: config.storefrontBaseUrl,
    }),
    payments: new PaymentsService({
      database,
      payments: repositories.payments,
      bookings: repositories.bookings,
      events,
      clock,
    }),
    clients: new ClientsService({ database, clients: repositories.clients, events, clock }),
    library: new LibraryService({ library: repositories.library, clock }),
    idempotency: new IdempotencyService({
      keys: repositories.idempotency,
      database,
      clock,
      ttlMs: config.idempotencyTtlMs,
      secrets,
    }),
    webhooks,
    dryRuns: new DryRunsService({ webhooks: repositories.webhooks, transformations, clock }),
    deliveries: new DeliveriesService({
      database,
      webhooks: repositories.webhooks,
      events,
      subscriptions: webhooks,
      clock,
    }),
    portal: new PortalService({
      sessions: repositories.portalSessions,
      tenants: repositories.tenants,
      clock,
      publicBaseUrl: config.publicBaseUrl,
    }),
    retention: new RetentionService({
      retention: repositories.retention,
      clock,
      days: config.retentionDays,
    }),
    notifier,
    secrets,
    secretKeyCheck: new SecretKeyCheck({
      settings: repositories.settings,
      webhooks: repositories.webhooks,
      secrets,
      keySource: options.keySource ?? 'SECRET_KEY',
    }),
    addressGuard,
    transformations,
  };
  return { services, repositories };
}
