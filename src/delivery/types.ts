import type { DeliveryStatus, WebhookAttemptsTable } from '../db/schema.ts';
import type { DeliveryError } from '../domain/attempts.ts';
import type { Ordering } from '../domain/flow-control.ts';
import type { PayloadForm } from '../domain/thin-payload.ts';
import type { PausedNotice } from '../notifications/mailer.ts';

/** A claimed delivery with what sending it needs. */
export interface ClaimedDelivery {
  id: string;
  tenantId: string;
  subscriptionId: string;
  eventId: string;
  eventType: string;
  /** This attempt's number (1 for the first): counted by the claim. */
  attempts: number;
  /** The claim's fence: an outcome is recorded only while the row still holds it. */
  claimedAt: string;
  data: string;
  /** A test fire's event: marked in the envelope, changes no counter. */
  isTest: boolean;
  /** The event's place in the subscription's ledger; null for a test fire. */
  sequence: number | null;
  /** As stored: a broker URL's password masked. */
  url: string;
  /** A broker URL's password, sealed; null for none. */
  urlPassword: string | null;
  /** Receiver authentication's secrets (HTTPS), sealed JSON; null for none. */
  receiverSecrets: string | null;
  standardWebhooks: boolean;
  /** The subscription's concurrency limit when claimed (within its maxConcurrency). */
  concurrencyLimit: number;
  /** Its cap on attempts a second, or null. */
  maxPerSecond: number | null;
  ordering: Ordering;
  /** Sealed, as stored. */
  signingKey: string;
  /** JSON of the keys rotations retired, sealed (see liveRetiredKeys). */
  retiredSigningKeys: string;
  /** `v1a` signatures too, with the sealed Ed25519 key and the retired ones still live. */
  asymmetricSignatures: boolean;
  signingKeyPair: string | null;
  /** The `traceparent` stored with the event (its producer span), or null. */
  traceContext: string | null;
  /** Send the attempt's `traceparent` to the endpoint. */
  propagateTraceContext: boolean;
  /** The body's form: the whole event or its ids. */
  payload: PayloadForm;
  /** The JavaScript run before each attempt (domain/transformation.ts), or null. */
  transformation: string | null;
  /** Its own waits between attempts as written (JSON), or null for the deployment's. */
  retrySchedule: string | null;
  /** Receiver authentication as reads show it (JSON, secrets masked), or null. */
  receiverAuth: string | null;
}

/** What one attempt changes on its delivery row. */
export interface DeliveryOutcome {
  id: string;
  /** The claim being settled: a row reclaimed by another worker since is left alone. */
  claimedAt: string;
  status: DeliveryStatus;
  /** The attempts counted, this one included (the history's count from then on). */
  attempts: number;
  /** The endpoint's answer; null when it gave none (the last answer is then kept). */
  lastResponseStatus: number | null;
  /** The attempt's error class; null when its status tells all (or it delivered). */
  lastError: DeliveryError | null;
  nextAttemptAt: string | null;
  deliveredAt: string | null;
}

/** One finished attempt, waiting to be recorded. */
export interface SettledAttempt {
  delivery: ClaimedDelivery;
  outcome: DeliveryOutcome;
  /** The HTTP status of a whole answer, or null (a time-out, a connection failure, a cut body). */
  status: number | null;
  /** When it finished (ISO 8601). */
  at: string;
  /** Until when the answer's Retry-After holds every delivery to the endpoint, if it asks. */
  holdUntil: string | null;
  /** Attempts running to the subscription in this process once it was sent, itself included. */
  runningAtSend: number;
  /** Its token server refused the subscription's credentials (a refusal, as a 4xx is). */
  credentialsRefused: boolean;
  /**
   * What the attempt log keeps of it (`status` as answered, even when the answer was then cut
   * off; the concurrency limit it was sent under).
   */
  attempt: Omit<WebhookAttemptsTable, 'id' | 'tenantId' | 'deliveryId' | 'attempt'> & {
    concurrencyLimit: number;
  };
}

/**
 * A claim given back unattempted, due again at `nextAttemptAt`: its endpoint is held, or its send
 * slot passed while this process could not start it.
 */
export interface GivenBackClaim {
  delivery: ClaimedDelivery;
  nextAttemptAt: string;
}

export interface WorkerOptions {
  /** Attempts running at once, over every endpoint. */
  maxRunning?: number;
  /**
   * Attempts this process runs at once to one subscription, whatever its concurrency limit (the
   * limit holds over every process, see claimStatement). Also the least one tenant may hold.
   */
  maxPerSubscription?: number;
  /** Most rows one claim takes. */
  batchSize?: number;
  /** Fallback polling when no signal arrives (other processes' retries, lost notifications). */
  pollIntervalMs?: number;
}

/**
 * What a worker reports as it goes (tests await these instead of polling the database):
 * `claimed` a batch of rows, `started` an attempt's start (a capped subscription's with the send
 * slot it waited for, epoch ms), `attempted` one POST, `givenBack` a claim given back unattempted
 * (its endpoint held, or its send slot missed), `recorded` a batch of outcomes committed, `paused`
 * a subscription auto-paused, `fault` one delivery's failure on our side.
 */
export interface WorkerEvents {
  claimed: [deliveries: ClaimedDelivery[]];
  started: [delivery: ClaimedDelivery, at: Date, slotMs: number | null];
  attempted: [attempt: SettledAttempt];
  givenBack: [delivery: ClaimedDelivery];
  recorded: [batch: SettledAttempt[]];
  paused: [notice: PausedNotice];
  /** One delivery's failure on our side, its own (see Recorder.record, deadLetterAbandoned). */
  fault: [fault: DeliveryFault];
}

/** A delivery whose settlement (`record`) or crash-loop dead letter (`crash_loop`) threw. */
export interface DeliveryFault {
  deliveryId: string;
  stage: 'record' | 'crash_loop';
}

export interface ClaimOptions {
  /** The claiming worker (webhook_workers.id). */
  workerId: string;
  /** Claims whose worker's heartbeat is older than this are abandoned (ISO 8601). */
  aliveSince: string;
  /** Claims without a worker (older versions) are abandoned once older than this. */
  staleBefore: string;
  /** Most rows of one subscription. */
  rowsPerSubscription: number;
  /**
   * How far ahead a capped subscription's next slot may be for it to be claimed for (µs); null
   * claims no capped subscription's rows.
   */
  paceHorizonUs: number | null;
  /** Subscriptions to leave alone (at their level in this worker, or held). */
  skip?: readonly string[];
  /** Most rows of each tenant listed, over all its subscriptions. */
  tenantRoom?: ReadonlyMap<string, number>;
  /** Most rows of a tenant not listed. */
  newcomerRoom?: number;
  skipTenants?: readonly string[];
  /**
   * Deliveries whose attempt this worker finished but has not recorded yet: their rows are still
   * in flight, their slots free. By id, not by count: one recorded while the claim runs must not
   * be taken off twice.
   */
  settled?: readonly string[];
}
