import type { ClaimedDelivery, GivenBackClaim, SettledAttempt } from './types.ts';

/** How a claim ended here: its attempt's outcome, or its giving back unattempted. */
export type Settlement = { attempt: SettledAttempt } | { givenBack: GivenBackClaim };

/**
 * Where a claim this worker holds stands. `claimed`: taken by a claim, not yet admitted;
 * `running`: admitted, its attempt under way or waiting for its send slot (it takes a slot of its
 * subscription and tenant); `settled`: its settlement waits to be recorded (its row is still
 * `in_flight`; its slots are free once its run ends); `recording`: it is in the recorder's
 * transaction (settled again if that fails). Recorded, it is forgotten.
 */
type Claim =
  | { stage: 'claimed' | 'running' }
  | { stage: 'settled' | 'recording'; settlement: Settlement };

/**
 * One worker's claims, from the claim to the recorded outcome, and the slots their running
 * attempts take per subscription and per tenant. The worker's only record of them: the claim
 * statement reads which rows it holds and which of those are settled, admission reads the slots,
 * the recorder takes the settlements to record from here and gives back here what failed to.
 * "In flight" is kept for the row's status (`in_flight`: claimed by some worker, not recorded).
 */
export class WorkerClaims {
  /** Each held claim, by delivery id. */
  private readonly claims = new Map<string, Claim>();
  /** The `settled` claims, in the order they settled (the order their outcomes are folded in). */
  private waiting = new Set<string>();
  private readonly runs = new Set<Promise<void>>();
  private readonly bySubscription = new Map<string, number>();
  private readonly byTenant = new Map<string, number>();
  /** Each subscription's concurrency limit as its latest claim read it, while it runs attempts. */
  private readonly limits = new Map<string, number>();

  /** Rows a claim took: held from now until recorded. */
  claimed(deliveries: readonly ClaimedDelivery[]): void {
    for (const delivery of deliveries) this.claims.set(delivery.id, { stage: 'claimed' });
  }

  /**
   * Admits a claimed row: it takes a slot of its subscription (whose limit in this worker is
   * `limit`) and of its tenant until `run` ends (the run settles it on the way). Returns how many
   * its subscription runs here, itself included; `ended` hears what its end left.
   */
  started(
    delivery: ClaimedDelivery,
    limit: number,
    run: (running: number) => Promise<void>,
    ended: (left: {
      subscription: number;
      tenant: number;
      otherTenants: number;
      /** The subscription's limit here as it ran. */
      limit: number;
    }) => void,
  ): number {
    if (this.claims.has(delivery.id)) this.claims.set(delivery.id, { stage: 'running' });
    const id = delivery.subscriptionId;
    const tenant = delivery.tenantId;
    const running = (this.bySubscription.get(id) ?? 0) + 1;
    this.bySubscription.set(id, running);
    this.limits.set(id, limit);
    this.byTenant.set(tenant, (this.byTenant.get(tenant) ?? 0) + 1);
    const done: Promise<void> = run(running).finally(() => {
      this.runs.delete(done);
      const subscription = decrement(this.bySubscription, id);
      const limitNow = this.limits.get(id) ?? limit;
      if (subscription === 0) this.limits.delete(id);
      const tenantLeft = decrement(this.byTenant, tenant);
      const otherTenants = this.byTenant.size - (tenantLeft === 0 ? 0 : 1);
      ended({ subscription, tenant: tenantLeft, otherTenants, limit: limitNow });
    });
    this.runs.add(done);
    return running;
  }

  /** Its attempt's outcome, or its giving back: to be recorded. */
  settled(id: string, settlement: Settlement): void {
    const stage = this.claims.get(id)?.stage;
    if (stage === 'settled' || stage === 'recording') return;
    this.claims.set(id, { stage: 'settled', settlement });
    this.waiting.add(id);
  }

  /** Whether a held row's run has not settled it (a run that threw). */
  unsettled(id: string): boolean {
    const stage = this.claims.get(id)?.stage;
    return stage === 'claimed' || stage === 'running';
  }

  /** Settlements waiting to be recorded. */
  get unrecorded(): number {
    return this.waiting.size;
  }

  /** Every settlement waiting, now `recording`: the recorder's next batch. */
  toRecord(): { attempts: SettledAttempt[]; givenBack: GivenBackClaim[] } {
    const attempts: SettledAttempt[] = [];
    const givenBack: GivenBackClaim[] = [];
    for (const id of this.waiting) {
      const claim = this.claims.get(id);
      if (claim?.stage !== 'settled') continue;
      claim.stage = 'recording';
      if ('attempt' in claim.settlement) attempts.push(claim.settlement.attempt);
      else givenBack.push(claim.settlement.givenBack);
    }
    this.waiting.clear();
    return { attempts, givenBack };
  }

  /** The batch was not recorded: its claims wait again, first in the next one. */
  notRecorded(ids: readonly string[]): void {
    const again: string[] = [];
    for (const id of ids) {
      const claim = this.claims.get(id);
      if (claim?.stage !== 'recording') continue;
      claim.stage = 'settled';
      again.push(id);
    }
    this.waiting = new Set([...again, ...this.waiting]);
  }

  /** Its settlement is recorded: the row is no longer this worker's. */
  recorded(id: string): void {
    this.claims.delete(id);
  }

  /** Every row this worker holds (for giving back what a lost claim answer took). */
  claimedIds(): string[] {
    return [...this.claims.keys()];
  }

  /** Held rows whose outcome is with the recorder: no longer running, though still in flight. */
  settledIds(): string[] {
    const ids: string[] = [];
    for (const [id, { stage }] of this.claims) {
      if (stage === 'settled' || stage === 'recording') ids.push(id);
    }
    return ids;
  }

  /** Attempts running (or waiting for their send slot): the worker's slots taken. */
  get running(): number {
    return this.runs.size;
  }

  /** Resolves when any running attempt ends. */
  anyEnds(): Promise<void> {
    return Promise.race(this.runs);
  }

  /** Resolves when every running attempt has ended. */
  async allEnd(): Promise<void> {
    await Promise.all(this.runs);
  }

  /** Attempts running per subscription, and per tenant (admission reads these). */
  get runningBySubscription(): ReadonlyMap<string, number> {
    return this.bySubscription;
  }

  get runningByTenant(): ReadonlyMap<string, number> {
    return this.byTenant;
  }

  /** A subscription's limit here as its latest admitted claim read it, while it runs any. */
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
