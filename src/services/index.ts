import type { Config } from '../config.ts';
import { ChangeFeed } from '../db/change-feed.ts';
import type { Database } from '../db/database.ts';
import type { Clock } from '../lib/clock.ts';
import { SecretBox } from '../lib/secret-box.ts';
import { BookingsRepository, PaymentsRepository } from '../repositories/bookings-repository.ts';
import { ClientsRepository } from '../repositories/clients-repository.ts';
import { EventsRepository } from '../repositories/events-repository.ts';
import { IdempotencyRepository } from '../repositories/idempotency-repository.ts';
import { LibraryRepository } from '../repositories/library-repository.ts';
import { NotificationsRepository } from '../repositories/notifications-repository.ts';
import {
  MembersRepository,
  TenantsRepository,
  TokensRepository,
} from '../repositories/tenants-repository.ts';
import { TripsRepository } from '../repositories/trips-repository.ts';
import { WebhooksRepository } from '../repositories/webhooks-repository.ts';
import { AddressGuard, type Resolver } from '../webhooks/address-guard.ts';
import { AuthCache } from './auth-cache.ts';
import { BookingsService } from './bookings-service.ts';
import { ClientsService } from './clients-service.ts';
import { DeliverySignal } from './delivery-signal.ts';
import { EventsService } from './events-service.ts';
import { IdempotencyService } from './idempotency-service.ts';
import { LibraryService } from './library-service.ts';
import { PaymentsService } from './payments-service.ts';
import { TenantsService } from './tenants-service.ts';
import { TokensService } from './tokens-service.ts';
import { TripsService } from './trips-service.ts';
import { WebhooksService } from './webhooks-service.ts';

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
  idempotency: IdempotencyService;
  repositories: {
    tenants: TenantsRepository;
    members: MembersRepository;
    tokens: TokensRepository;
    trips: TripsRepository;
    bookings: BookingsRepository;
    payments: PaymentsRepository;
    clients: ClientsRepository;
    library: LibraryRepository;
    events: EventsRepository;
    notifications: NotificationsRepository;
    idempotency: IdempotencyRepository;
    webhooks: WebhooksRepository;
  };
  webhooks: WebhooksService;
  deliverySignal: DeliverySignal;
  /** Seals signing keys at rest (SECRET_KEY). */
  secrets: SecretBox;
  /** Decides which webhook endpoints may be registered and connected to. */
  addressGuard: AddressGuard;
}

/**
 * How long another process's revocation or tenant change can take to reach this one when no
 * notification arrives (SQLite with the CLI, or a lost LISTEN connection); changes made through
 * this process apply at once, and on PostgreSQL other serving processes hear of them at once.
 */
export const AUTH_CACHE_TTL_MS = 2_000;

/** The one place that wires repositories into services; the HTTP app, CLI and tests share it. */
export function createServices(
  config: Config,
  database: Database,
  clock: Clock,
  onBackgroundError: (error: unknown) => void,
  options: { secretKey: string; resolver?: Resolver },
): Services {
  const { db } = database;
  const repositories = {
    tenants: new TenantsRepository(db),
    members: new MembersRepository(db),
    tokens: new TokensRepository(db),
    trips: new TripsRepository(db),
    bookings: new BookingsRepository(db),
    payments: new PaymentsRepository(db),
    clients: new ClientsRepository(db),
    library: new LibraryRepository(db),
    events: new EventsRepository(db),
    notifications: new NotificationsRepository(db),
    idempotency: new IdempotencyRepository(db, database.dialect),
    webhooks: new WebhooksRepository(db, database.dialect),
  };
  const deliverySignal = new DeliverySignal(database);
  const events = new EventsService(
    repositories.events,
    repositories.webhooks,
    deliverySignal,
    clock,
  );
  const secrets = new SecretBox(options.secretKey);
  const addressGuard = new AddressGuard({
    allowPrivate: config.webhook.allowPrivateTargets,
    resolver: options.resolver,
  });
  const authCache = new AuthCache(AUTH_CACHE_TTL_MS);
  const changes = new ChangeFeed(database);
  return {
    authCache,
    repositories,
    events,
    tenants: new TenantsService(
      repositories.tenants,
      repositories.members,
      repositories.notifications,
      authCache,
      changes,
      clock,
    ),
    tokens: new TokensService(
      repositories.tokens,
      repositories.tenants,
      repositories.members,
      clock,
      config.deploymentEnv,
      authCache,
      changes,
      onBackgroundError,
    ),
    trips: new TripsService(
      database,
      repositories.trips,
      repositories.tenants,
      repositories.clients,
      repositories.library,
      events,
      clock,
    ),
    bookings: new BookingsService(
      database,
      repositories.bookings,
      repositories.trips,
      events,
      clock,
      config.storefrontBaseUrl,
    ),
    payments: new PaymentsService(
      database,
      repositories.payments,
      repositories.bookings,
      events,
      clock,
    ),
    clients: new ClientsService(database, repositories.clients, events, clock),
    library: new LibraryService(repositories.library, clock),
    idempotency: new IdempotencyService(
      repositories.idempotency,
      database,
      clock,
      config.idempotencyTtlMs,
      secrets,
    ),
    webhooks: new WebhooksService(
      database,
      repositories.webhooks,
      repositories.tenants,
      events,
      deliverySignal,
      addressGuard,
      secrets,
      clock,
      config.webhook.keyOverlapMs,
    ),
    deliverySignal,
    secrets,
    addressGuard,
  };
}
