import type { Generated } from 'kysely';
import type { AttemptErrorClass, DeliveryError } from '../domain/attempts.ts';
import type { ErasureStage, ErasureStatus, ErasureSubjectKind } from '../domain/erasure.ts';
import type { Ordering } from '../domain/flow-control.ts';
import type { Tier } from '../domain/plans.ts';
import type {
  BookingStatus,
  CLIENT_KINDS,
  DeliveryStatus,
  MEMBER_ROLES,
  PAYMENT_MODES,
  PauseReason,
  PaymentStatus,
  PRICING_DISPLAY_MODES,
  TRANSPORT_MODES,
  TripStatus,
} from '../domain/states.ts';
import type { PayloadForm } from '../domain/thin-payload.ts';

/**
 * Row types as Kysely sees them through CamelCasePlugin (columns are snake_case in SQL).
 * Timestamps are ISO 8601 UTC strings with milliseconds in both backends: one representation,
 * lexicographic order equals time order, and rows serialize without conversion.
 * Booleans are stored as 0/1 integers (the row builders and the drivers' parameters convert, see
 * row-builder.ts) and arrays as JSON text, for the same reason.
 */
export interface TenantsTable {
  id: string;
  name: string;
  slug: string;
  tier: Tier;
  active: boolean;
  tripQuota: number | null;
  webhookEndpointCap: number | null;
  createdAt: string;
  updatedAt: string;
}

export interface MembersTable {
  id: string;
  tenantId: string;
  email: string;
  role: (typeof MEMBER_ROLES)[number];
  createdAt: string;
}

export interface ApiTokensTable {
  id: string;
  tenantId: string;
  name: string | null;
  tokenHash: string;
  prefix: string;
  env: 'live' | 'test';
  /** JSON array of scope names. */
  scopes: string;
  createdBy: string | null;
  expiresAt: string | null;
  revokedAt: string | null;
  lastUsedAt: string | null;
  createdAt: string;
}

interface CitiesTable {
  id: string;
  tenantId: string;
  name: string;
  countryIso: string | null;
  createdAt: string;
  updatedAt: string;
}

interface HotelsTable {
  id: string;
  tenantId: string;
  name: string;
  cityId: string | null;
  stars: number | null;
  address: string | null;
  createdAt: string;
  updatedAt: string;
}

interface ActivitiesTable {
  id: string;
  tenantId: string;
  name: string;
  cityId: string | null;
  durationMinutes: number | null;
  description: string | null;
  createdAt: string;
  updatedAt: string;
}

interface VehiclesTable {
  id: string;
  tenantId: string;
  name: string;
  kind: string | null;
  seats: number | null;
  createdAt: string;
  updatedAt: string;
}

interface GuidesTable {
  id: string;
  tenantId: string;
  name: string;
  /** JSON array of language tags. */
  languages: string;
  email: string | null;
  phone: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface TripsTable {
  id: string;
  tenantId: string;
  tripNumber: string;
  title: string;
  status: TripStatus;
  tripMode: 'tailor_made' | 'template';
  dateMode: 'departure_based' | 'range_based';
  publicSlug: string | null;
  publishedAt: string | null;
  unpublishedAt: string | null;
  startDate: string | null;
  endDate: string | null;
  daysCount: number;
  startCityId: string | null;
  endCityId: string | null;
  transportMode: (typeof TRANSPORT_MODES)[number];
  pricingDisplayMode: (typeof PRICING_DISPLAY_MODES)[number];
  shortDescription: string | null;
  longDescription: string | null;
  clientId: string | null;
  notes: string | null;
  version: number;
  createdBy: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface BookingsTable {
  id: string;
  tenantId: string;
  bookingNumber: string;
  tripId: string;
  tripVersion: number;
  /** JSON of the trip as it was when booked. */
  tripSnapshot: string;
  status: BookingStatus;
  totalRetailCents: number;
  applicationFeeCents: number;
  currency: string;
  travelerName: string | null;
  travelerEmail: string | null;
  confirmedAt: string | null;
  cancelledAt: string | null;
  departureId: string | null;
  departureStartDate: string | null;
  departureEndDate: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface PaymentsTable {
  id: string;
  tenantId: string;
  bookingId: string;
  mode: (typeof PAYMENT_MODES)[number];
  status: PaymentStatus;
  label: string;
  amountCents: number;
  currency: string;
  scheduledFor: string | null;
  chargedAt: string | null;
  isDeposit: boolean;
  paymentRail: string | null;
  kind: string;
  createdAt: string;
  updatedAt: string;
}

export interface ClientsTable {
  id: string;
  tenantId: string;
  kind: (typeof CLIENT_KINDS)[number];
  displayName: string;
  legalName: string | null;
  email: string | null;
  phone: string | null;
  countryIso: string | null;
  language: string | null;
  currency: string | null;
  vatId: string | null;
  /** JSON array of tags. */
  tags: string;
  notes: string | null;
  archivedAt: string | null;
  createdAt: string;
  updatedAt: string;
}

/** Transactional outbox: written in the same transaction as the state change it reports. */
export interface EventsTable {
  /** Sequence for relays that read the outbox in commit order. */
  seq: Generated<number>;
  id: string;
  tenantId: string;
  type: string;
  /** JSON of the event's `data`. */
  data: string;
  /** Fired by a test (`POST /api/v1/webhooks/test`): marked in the envelope, counted nowhere. */
  isTest: boolean;
  /** W3C `traceparent` of the span that created it; null when tracing was off. */
  traceContext: string | null;
  createdAt: string;
}

/** Notices to a tenant's owners and admins (auto-pause of a webhook endpoint). */
export interface NotificationsTable {
  id: string;
  tenantId: string;
  memberId: string | null;
  recipient: string;
  kind: string;
  subscriptionId: string | null;
  createdAt: string;
}

export interface WebhookSubscriptionsTable {
  id: string;
  tenantId: string;
  /** As shown: a broker URL's password is `***` here (see splitPassword). */
  url: string;
  /** A broker URL's password, sealed like signingKey; null when it has none. */
  urlPassword: string | null;
  /** JSON array of event types. */
  events: string;
  /** False after a delete or an auto-pause. */
  active: boolean;
  pausedAt: string | null;
  /** Why it is not active; null while active. */
  pauseReason: PauseReason | null;
  /** Set by DELETE: the subscription is gone for every operation but listing. */
  deletedAt: string | null;
  consecutiveFailures: number;
  /** Consecutive 4xx answers (auto-pause), and when that run began. */
  clientErrorRun: number;
  clientErrorRunSince: string | null;
  lastSuccessAt: string | null;
  lastFailureAt: string | null;
  /** Sealed with SECRET_KEY (SecretBox, bound to the subscription id). */
  signingKey: string;
  /**
   * Keys retired by rotations that still sign until the expiry promised for each: JSON
   * `[{key, expiresAt}]`, newest first, each key sealed like signingKey.
   */
  retiredSigningKeys: string;
  /** Deliveries also carry the Standard Webhooks headers (webhook-id, -timestamp, -signature). */
  standardWebhooks: boolean;
  /** `webhook-signature` also carries `v1a` Ed25519 signatures (needs standardWebhooks). */
  asymmetricSignatures: boolean;
  /** The Ed25519 secret key (`whsk_…`), sealed like signingKey; null when off. */
  signingKeyPair: string | null;
  /** Its public key (`whpk_…`), shown to the receiver; null when off. */
  publicKey: string | null;
  /** Until when the receiver's Retry-After holds every delivery to it (claims skip it). */
  heldUntil: string | null;
  /** The most attempts in flight at once its owner allows (1-64). */
  maxConcurrency: number;
  /** The adaptive limit on attempts in flight (see nextConcurrency), at most maxConcurrency. */
  concurrencyLimit: number;
  /** The limit's last move was a cut the endpoint's answers asked for. */
  backedOff: boolean;
  /** The most deliveries a second, over every worker process; null for no cap. */
  maxPerSecond: number | null;
  /** `per_object`: one delivery per object in flight at a time, in sequence order. */
  ordering: Ordering;
  /** Deliveries carry the attempt's `traceparent` (and `tracestate`) when tracing is on. */
  propagateTraceContext: boolean;
  /** The payload filter as checked JSON (domain/payload-filter.ts); null for every event. */
  filter: string | null;
  /** The form of its bodies: the whole event or its ids (domain/thin-payload.ts). */
  payload: PayloadForm;
  /** The JavaScript run before each attempt (domain/transformation.ts); null for none. */
  transformation: string | null;
  /** Its own waits between attempts, as written (a JSON array of durations); null: the default. */
  retrySchedule: string | null;
  /** Receiver authentication as reads show it (secrets `***`), JSON; null for none. */
  receiverAuth: string | null;
  /** The same in clear, sealed like signingKey (domain/receiver-auth.ts); null for none. */
  receiverSecrets: string | null;
  createdAt: string;
}

/** An event a paused subscription got no delivery for (see migration 0023). */
export interface WebhookMissedEventsTable {
  subscriptionId: string;
  eventId: string;
  tenantId: string;
  eventType: string;
  objectKey: string | null;
  eventCreatedAt: string;
}

/** Each subscription's last event sequence taken (see migration 0014). */
interface WebhookSequencesTable {
  subscriptionId: string;
  tenantId: string;
  lastSequence: number;
}

export type { DeliveryStatus };

export interface WebhookDeliveriesTable {
  id: string;
  tenantId: string;
  subscriptionId: string;
  eventId: string;
  eventType: string;
  status: DeliveryStatus;
  attempts: number;
  lastResponseStatus: number | null;
  nextAttemptAt: string | null;
  deliveredAt: string | null;
  claimedAt: string | null;
  /** The worker (webhook_workers.id) whose claim it is, while in flight. */
  claimedBy: string | null;
  redeliveredFromId: string | null;
  /** Error class of the last attempt that had one (see DeliveryError); null after a 2xx. */
  lastError: DeliveryError | null;
  /** Claims of it that died with their worker since its last recorded attempt (a crash loop). */
  workerLosses: Generated<number>;
  /** Of a test fire: counted in no subscription figure. */
  isTest: boolean;
  /** The event's place in its subscription's ledger; a redelivery keeps it; null on test fires. */
  sequence: number | null;
  /** The object the event is about (see orderingKey), for `per_object` ordering. */
  objectKey: string | null;
  createdAt: string;
}

/** One HTTP attempt of a delivery. */
export interface WebhookAttemptsTable {
  id: string;
  tenantId: string;
  deliveryId: string;
  /** 1 for the first attempt of the delivery. */
  attempt: number;
  startedAt: string;
  durationMs: number;
  status: number | null;
  errorClass: AttemptErrorClass | null;
  /** The first KiB of the response body, as text. */
  responseBody: string;
  /** The `Retry-After` of a 429 or 503 answer, as received (cut to 100 characters). */
  retryAfter: string | null;
  /** The subscription's concurrency limit when it was sent; null before flow control. */
  concurrencyLimit: number | null;
  /** Its transformation cancelled it: it succeeded, and nothing was sent. */
  cancelled: boolean;
}

/**
 * A delivery still to be sent: its place in the queue (see migration 0032). `attempts` counts
 * the attempt claimed, while it is; `sequence` and `objectKey` only for a `per_object`
 * subscription's rows.
 */
interface WebhookQueueTable {
  deliveryId: string;
  subscriptionId: string;
  nextAttemptAt: string;
  attempts: Generated<number>;
  workerLosses: Generated<number>;
  claimedAt: string | null;
  claimedBy: string | null;
  sequence: number | null;
  objectKey: string | null;
}

/** A running delivery worker process (see migration 0022). */
interface WebhookWorkersTable {
  id: string;
  startedAt: string;
  heartbeatAt: string;
}

/** A capped subscription's next free send slot, epoch microseconds (see migration 0022). */
interface WebhookPacingTable {
  subscriptionId: string;
  nextSlotUs: number;
  /** How late a start may be beside other workers (see migration 0028). */
  marginUs: Generated<number>;
  raisedAtUs: Generated<number>;
}

/** A webhook portal link and, once used, its browser session (secrets as SHA-256 hex). */
export interface PortalSessionsTable {
  id: string;
  tenantId: string;
  /** The API token that asked for the link; null when the operator did (admin API). */
  tokenId: string | null;
  readOnly: boolean;
  linkHash: string;
  linkExpiresAt: string;
  /** Set when the link is used; null before. */
  sessionHash: string | null;
  expiresAt: string | null;
  createdAt: string;
}

export interface IdempotencyKeysTable {
  tenantId: string;
  key: string;
  /** SHA-256 of method, path with query and body. */
  fingerprint: string;
  status: 'in_progress' | 'done';
  responseStatus: number | null;
  responseType: string | null;
  responseBody: string | null;
  createdAt: string;
  expiresAt: string;
}

/** One person's erasure and how far it got (see migration 0030). */
export interface ErasuresTable {
  id: string;
  tenantId: string;
  status: ErasureStatus;
  subjectKind: ErasureSubjectKind;
  /** The client or booking named; null for an e-mail. */
  subjectId: string | null;
  /** The e-mail named, until the erasure is done; null otherwise. */
  subjectEmail: string | null;
  /** JSON arrays of the ids the subject resolved to when it was made. */
  clientIds: string;
  bookingIds: string;
  stage: ErasureStage;
  /** Where the stage's scan got to (an event `seq`, or an idempotency key); '' at its start. */
  cursor: string;
  /** JSON `{<store>: <count>}` of the rows changed so far. */
  redacted: string;
  leaseUntil: string | null;
  leaseToken: string | null;
  requestedAt: string;
  startedAt: string | null;
  completedAt: string | null;
}

/** Values about the installation itself (see migration 0012). */
interface InstanceSettingsTable {
  name: string;
  value: string;
}

interface SchemaMigrationsTable {
  id: string;
  appliedAt: string;
}

export interface DB {
  erasures: ErasuresTable;
  tenants: TenantsTable;
  members: MembersTable;
  apiTokens: ApiTokensTable;
  cities: CitiesTable;
  hotels: HotelsTable;
  activities: ActivitiesTable;
  vehicles: VehiclesTable;
  guides: GuidesTable;
  trips: TripsTable;
  bookings: BookingsTable;
  payments: PaymentsTable;
  clients: ClientsTable;
  events: EventsTable;
  notifications: NotificationsTable;
  idempotencyKeys: IdempotencyKeysTable;
  webhookSubscriptions: WebhookSubscriptionsTable;
  webhookSequences: WebhookSequencesTable;
  webhookMissedEvents: WebhookMissedEventsTable;
  webhookDeliveries: WebhookDeliveriesTable;
  webhookAttempts: WebhookAttemptsTable;
  webhookQueue: WebhookQueueTable;
  webhookWorkers: WebhookWorkersTable;
  webhookPacing: WebhookPacingTable;
  instanceSettings: InstanceSettingsTable;
  portalSessions: PortalSessionsTable;
  schemaMigrations: SchemaMigrationsTable;
}
