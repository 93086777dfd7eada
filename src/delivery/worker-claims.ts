import type { Logger } from 'pino';
import type { RunningLeft } from './admission.ts';
import type { ClaimedDelivery, GivenBackClaim, SettledAttempt } from './types.ts';

/** How a claim ended here: its attempt's outcome, or its giving back unattempted. */
export type Settlement = { attempt: SettledAttempt } | { givenBack: GivenBackClaim };

/** Settlements recorded together, in one transaction. */
export interface SettledBatch {
  attempts: SettledAttempt[];
  givenBack: GivenBackClaim[];
}

/**
 * What records a batch (the Recorder): resolves once it is committed, with the deliveries it left
 * unrecorded (none, or the batch's rest when the database refused it); rejects if nothing was.
 */
export interface BatchRecorder {
  record(batch: SettledBatch): Promise<readonly string[]>;
}

/** Record when this many settlements wait, or RECORD_DELAY_MS after the first. */
const RECORD_BATCH = 200;
const RECORD_DELAY_MS = 5;
/** After a failed recording, the next try (the settlements wait here meanwhile). */
const RECORD_RETRY_MS = 1_000;

/**
 * Where a claim of this worker stands. `running`: claimed, its attempt waiting for its start or
 * under way (it takes a slot of its subscription and of its tenant); `settled`: its settlement
 * waits to be recorded (its row is still `in_flight`, its slots are free); `recording`: it is in
 * the recorder's transaction (settled again if that fails). Recorded, it is forgotten.
 */
type Claim = { stage: 'running' } | { stage: 'settled' | 'recording'; settlement: Settlement };

/**
 * One worker's claims, from the claim to the recorded outcome: a claim runs, settles and is
 * recorded here, in batches handed to the recorder, one recording at a time. The worker's only
 * record of them: the claim statement reads which rows are its claims and which of those are settled,
 * admission reads the slots their running attempts take per subscription and per tenant. A batch
 * that fails to record stays settled and is tried again: a live worker's claims are never taken
 * over, so nothing but the worker itself can record them. "In flight" is kept for the row's status
 * (`in_flight`: claimed by some worker, not recorded).
 */
export class WorkerClaims {
  /** Each held claim, by delivery id. */
  private readonly claims = new Map<string, Claim>();
  /** The `settled` claims, in the order they settled (the order their outcomes are folded in). */
  private waiting = new Set<string>();
  private runningCount = 0;
  private readonly bySubscription = new Map<string, number>();
  private readonly byTenant = new Map<string, number>();
  /** Each subscription's concurrency limit as its latest claim read it, while it runs attempts. */
  private readonly limits = new Map<string, number>();
  /** Who waits for the next settlement (see anyEnds). */
  private ends: Array<() => void> = [];
  private recording: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly deps: {
      recorder: BatchRecorder;
      logger: Logger;
      /** The most attempts this worker runs to one subscription, whatever its limit. */
      maxPerSubscription: number;
    },
  ) {}

  /**
   * Rows a claim took: each runs from now, taking a slot of its subscription and of its tenant
   * until it settles. Returns, for each, how many its subscription runs here, itself included.
   */
  claimed(deliveries: readonly ClaimedDelivery[]): number[] {
    return deliveries.map((delivery) => {
      this.claims.set(delivery.id, { stage: 'running' });
      this.runningCount++;
      const id = delivery.subscriptionId;
      const running = (this.bySubscription.get(id) ?? 0) + 1;
      this.bySubscription.set(id, running);
      this.limits.set(id, Math.min(this.deps.maxPerSubscription, delivery.concurrencyLimit));
      this.byTenant.set(delivery.tenantId, (this.byTenant.get(delivery.tenantId) ?? 0) + 1);
      return running;
    });
  }

  /**
   * A running claim's attempt outcome, or its giving back: its slots free, its settlement to be
   * recorded (at once when the answer asked for a hold: claims in other processes skip the
   * endpoint from then on). Returns what it left running, or null when it was no longer running
   * (settled already: a second settlement changes nothing).
   */
  settled(settlement: Settlement): RunningLeft | null {
    const delivery =
      'attempt' in settlement ? settlement.attempt.delivery : settlement.givenBack.delivery;
    if (this.claims.get(delivery.id)?.stage !== 'running') return null;
    this.claims.set(delivery.id, { stage: 'settled', settlement });
    this.waiting.add(delivery.id);
    this.runningCount--;
    const id = delivery.subscriptionId;
    const subscription = decrement(this.bySubscription, id);
    const limit = this.limits.get(id) as number;
    if (subscription === 0) this.limits.delete(id);
    const tenant = decrement(this.byTenant, delivery.tenantId);
    const otherTenants = this.byTenant.size - (tenant === 0 ? 0 : 1);
    const ends = this.ends;
    this.ends = [];
    for (const end of ends) end();
    const hold = 'attempt' in settlement && settlement.attempt.holdUntil !== null;
    if (hold || this.waiting.size >= RECORD_BATCH) void this.record();
    else this.timer ??= setTimeout(() => void this.record(), RECORD_DELAY_MS);
    return { subscription, tenant, otherTenants, limit };
  }

  /** Records every settlement waiting, one recording at a time; resolves once recorded or kept. */
  async record(): Promise<void> {
    while (this.recording) await this.recording;
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    const batch = this.toRecord();
    const ids = [...batch.attempts, ...batch.givenBack].map(({ delivery }) => delivery.id);
    if (ids.length === 0) return;
    const retry = (left: readonly string[]) => {
      this.notRecorded(left);
      this.timer ??= setTimeout(() => void this.record(), RECORD_RETRY_MS);
    };
    this.recording = this.deps.recorder.record(batch).then(
      (left) => {
        const unrecorded = new Set(left);
        // Committed, a retried row is claimable before this answer is read: a claim that took it
        // again meanwhile is the one held now, and is kept.
        for (const id of ids) {
          if (!unrecorded.has(id) && this.claims.get(id)?.stage === 'recording') {
            this.claims.delete(id);
          }
        }
        if (left.length === 0) return;
        this.deps.logger.error(
          { left: left.length },
          'recording delivery outcomes failed; retrying',
        );
        retry(left);
      },
      (error) => {
        this.deps.logger.error({ err: error }, 'recording delivery outcomes failed; retrying');
        retry(ids);
      },
    );
    try {
      await this.recording;
    } finally {
      this.recording = null;
    }
  }

  /** Records what is settled and stops retrying: what stays unrecorded is left to a takeover. */
  async close(): Promise<void> {
    await this.record();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  /** Every settlement waiting, now `recording`: the next batch. */
  private toRecord(): SettledBatch {
    const batch: SettledBatch = { attempts: [], givenBack: [] };
    for (const id of this.waiting) {
      const claim = this.claims.get(id);
      if (claim?.stage !== 'settled') continue;
      claim.stage = 'recording';
      if ('attempt' in claim.settlement) batch.attempts.push(claim.settlement.attempt);
      else batch.givenBack.push(claim.settlement.givenBack);
    }
    this.waiting.clear();
    return batch;
  }

  /** The batch was not recorded: its claims wait again, first in the next one. */
  private notRecorded(ids: readonly string[]): void {
    const again: string[] = [];
    for (const id of ids) {
      const claim = this.claims.get(id);
      if (claim?.stage !== 'recording') continue;
      claim.stage = 'settled';
      again.push(id);
    }
    this.waiting = new Set([...again, ...this.waiting]);
  }

  /** Every row this worker has claimed (for giving back what a lost claim answer took). */
  claimedIds(): string[] {
    return [...this.claims.keys()];
  }

  /** Claimed rows whose outcome is settled: no longer running, though still in flight. */
  settledIds(): string[] {
    const ids: string[] = [];
    for (const [id, { stage }] of this.claims) {
      if (stage === 'settled' || stage === 'recording') ids.push(id);
    }
    return ids;
  }

  /** Claims running (their attempts waiting for their start or under way): the slots taken. */
  get running(): number {
    return this.runningCount;
  }

  /** Resolves when the next running claim settles. */
  anyEnds(): Promise<void> {
    return new Promise((resolve) => this.ends.push(resolve));
  }

  /** Resolves when no claim runs. */
  async allEnd(): Promise<void> {
    while (this.runningCount > 0) await this.anyEnds();
  }

  /** Attempts running per subscription, and per tenant (admission reads these). */
  get runningBySubscription(): ReadonlyMap<string, number> {
    return this.bySubscription;
  }

  get runningByTenant(): ReadonlyMap<string, number> {
    return this.byTenant;
  }

  /** A subscription's limit here as its latest claim read it, while it runs any. */
  limitOf(subscriptionId: string): number | undefined {
    return this.limits.get(subscriptionId);
  }
}

/** One less of `key`; the entry goes at zero. Returns what is left. */
function decrement(counts: Map<string, number>, key: string): number {
  const left = (counts.get(key) ?? 1) - 1;
  if (left === 0) counts.delete(key);
  else counts.set(key, left);
  return left;
}
