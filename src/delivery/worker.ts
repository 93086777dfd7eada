import { EventEmitter } from 'node:events';
import type { Config } from '../config.ts';
import { DELIVERIES_CHANNEL, HOLDS_CHANNEL, type Notifier } from '../db/notifier.ts';
import { MAX_CONCURRENCY } from '../domain/flow-control.ts';
import type { SecretBox } from '../lib/secret-box.ts';
import { TransformationRunner } from '../transformations/runner.ts';
import {
  mayHaveMore,
  reopening,
  subscriptionClaimShare,
  subscriptionLevels,
  tenantClaimPlan,
} from './admission.ts';
import { AttemptRunner } from './attempt.ts';
import type { BrokerSender } from './broker-sender.ts';
import { Holds, storedHoldRead } from './holds.ts';
import { INTERNAL_FAILURE, type SendResult, type WebhookSender } from './http-sender.ts';
import { Pacer, type PaceSlot } from './pace.ts';
import { Recorder, type RecorderDeps } from './recorder.ts';
import { abandonedBefore, WorkerRegistry } from './registry.ts';
import type { ClaimedDelivery, WorkerEvents, WorkerOptions } from './types.ts';
import { Wakes } from './wakes.ts';
import { type Settlement, WorkerClaims } from './worker-claims.ts';

/** The recorder's dependencies (its `webhook` settings come from `config`), and the loop's own. */
export interface WorkerDependencies extends Omit<RecorderDeps, 'webhook'> {
  config: Config;
  notifier: Notifier;
  secrets: SecretBox;
  sender: WebhookSender;
  brokers: BrokerSender;
  /** The sandbox that runs subscriptions' transformations; else the worker starts its own. */
  transformations?: TransformationRunner;
}

/** What the loop is doing: `full` waits for a slot, `sleeping` for a signal or the poll. */
export type LoopState = 'stopped' | 'joining' | 'claiming' | 'full' | 'sleeping' | 'stopping';

export const DEFAULT_MAX_RUNNING = 256;
export const DEFAULT_MAX_PER_SUBSCRIPTION = MAX_CONCURRENCY;
export const DEFAULT_BATCH_SIZE = 200;

/**
 * The delivery worker: claims due rows (fair shares), starts each (holds, pace), attempts it, and
 * settles it in its claims, which have it recorded. Any number of workers may run against one
 * database: claims are atomic, every outcome is fenced by its claim, and a worker that dies loses
 * its claims to the others within seconds (see WorkerRegistry).
 */
export class DeliveryWorker extends EventEmitter<WorkerEvents> {
  private readonly maxRunning: number;
  private readonly maxPerSubscription: number;
  private readonly claimPerSubscription: number;
  private readonly batchSize: number;
  private readonly pollIntervalMs: number;
  private readonly attempts: AttemptRunner;
  private readonly transformations: TransformationRunner;
  private readonly recorder: Recorder;
  private readonly registry: WorkerRegistry;
  private readonly holds: Holds;
  private readonly wakes: Wakes;
  private readonly pacer: Pacer;

  state: LoopState = 'stopped';
  private loop: Promise<void> | null = null;
  /** Every claim of this worker, from the claim to its recorded outcome, and their slots. */
  private readonly claims: WorkerClaims;
  /** A claim failed: rows it may have claimed unseen are given back before the next one. */
  private claimCut = false;
  private lastAbandonedSweep = Number.NEGATIVE_INFINITY;
  private readonly onHold = (payload: string) => {
    try {
      const { subscriptionId, until } = JSON.parse(payload) as {
        subscriptionId: string;
        until: number;
      };
      this.holds.hold(subscriptionId, until);
    } catch (error) {
      this.deps.logger.warn({ err: error }, 'ignored a malformed hold notice');
    }
  };

  constructor(
    private readonly deps: WorkerDependencies,
    options: WorkerOptions = {},
  ) {
    super();
    this.maxRunning = options.maxRunning ?? DEFAULT_MAX_RUNNING;
    this.maxPerSubscription = options.maxPerSubscription ?? DEFAULT_MAX_PER_SUBSCRIPTION;
    this.claimPerSubscription = subscriptionClaimShare(this.maxPerSubscription);
    this.batchSize = options.batchSize ?? DEFAULT_BATCH_SIZE;
    this.pollIntervalMs = options.pollIntervalMs ?? 1_000;
    this.wakes = new Wakes(deps.clock, this.pollIntervalMs);
    this.holds = new Holds(storedHoldRead(deps.database));
    this.transformations = deps.transformations ?? new TransformationRunner();
    this.attempts = new AttemptRunner({
      ...deps,
      publicBaseUrl: deps.config.publicBaseUrl,
      transformations: this.transformations,
    });
    this.registry = new WorkerRegistry(deps);
    this.pacer = new Pacer({ ...deps, registry: this.registry, wakes: this.wakes });
    this.recorder = new Recorder(
      { ...deps, webhook: deps.config.webhook },
      { wakes: this.wakes, reports: this },
    );
    this.claims = new WorkerClaims({
      recorder: this.recorder,
      logger: deps.logger,
      maxPerSubscription: this.maxPerSubscription,
    });
  }

  /** This worker's id in the registry (webhook_workers), which its claims carry. */
  get id(): string {
    return this.registry.id;
  }

  start(): void {
    if (this.state !== 'stopped') return;
    this.state = 'joining';
    this.deps.notifier.on(DELIVERIES_CHANNEL, this.wakes.signal);
    this.deps.notifier.on(HOLDS_CHANNEL, this.onHold);
    this.loop = this.join().then(() => this.run());
  }

  /**
   * What this worker's readiness probe says of it at `nowMs` (its database is the probe's to
   * ask): `draining` once it stops, `joining` until it is in the registry, `late` while its
   * heartbeat is (see WorkerRegistry.lateAt), else `running`.
   */
  readinessAt(nowMs: number): 'running' | 'joining' | 'late' | 'draining' {
    if (this.state === 'stopping' || this.state === 'stopped') return 'draining';
    if (this.state === 'joining') return 'joining';
    return this.registry.lateAt(nowMs) ? 'late' : 'running';
  }

  /** Joins the registry before the first claim, which carries this worker's id. */
  private async join(): Promise<void> {
    while (this.state === 'joining') {
      try {
        await this.registry.join();
        this.wakes.at(this.registry.pacedFromMs);
        return;
      } catch (error) {
        this.deps.logger.warn({ err: error }, 'joining the worker registry failed; retrying');
        await new Promise((resolve) => setTimeout(resolve, this.pollIntervalMs));
      }
    }
  }

  /**
   * Stops claiming, lets running attempts finish (each is bounded by WEBHOOK_TIMEOUT_MS; those
   * still waiting for their send slot are given back) and records them, then leaves the registry.
   */
  async stop(): Promise<void> {
    if (this.state === 'stopped' || this.state === 'stopping') return;
    this.state = 'stopping';
    this.deps.notifier.off(DELIVERIES_CHANNEL, this.wakes.signal);
    this.deps.notifier.off(HOLDS_CHANNEL, this.onHold);
    this.wakes.stop();
    await this.loop;
    await this.claims.allEnd();
    await this.claims.close();
    await this.recorder.close();
    if (this.deps.transformations === undefined) await this.transformations.close();
    await this.registry.leave();
    this.state = 'stopped';
  }

  private stopping(): boolean {
    return this.state === 'stopping';
  }

  private async run(): Promise<void> {
    while (!this.stopping()) {
      if (this.claims.running >= this.maxRunning) {
        this.state = 'full';
        await this.claims.anyEnds();
        continue;
      }
      this.state = 'claiming';
      this.wakes.claimStarts();
      const limit = Math.min(this.batchSize, this.maxRunning - this.claims.running);
      let more: boolean;
      try {
        more = await this.claim(limit);
      } catch (error) {
        this.deps.logger.warn({ err: error }, 'claiming deliveries failed; retrying');
        this.claimCut = true;
        more = false;
      }
      if (this.stopping()) break;
      if (!more && !this.wakes.signalled) {
        this.state = 'sleeping';
        await this.wakes.sleep();
      }
    }
  }

  /**
   * One claim and the admission of what it took; whether a claim right after it could find more
   * (see mayHaveMore). Once per poll interval, abandoned claims of a crash loop are dead-lettered
   * first (see WORKER_LOSSES_LIMIT); every other abandoned claim is sent again by the claim.
   */
  private async claim(limit: number): Promise<boolean> {
    const { queue, config, clock, logger } = this.deps;
    const now = clock.now();
    const nowMs = now.getTime();
    const { aliveSince, staleBefore } = abandonedBefore(nowMs, config.webhook);
    if (this.claimCut) {
      const known = this.claims.claimedIds();
      const givenBack = await queue.giveBackUnknown(this.id, known, now.toISOString());
      if (givenBack > 0) logger.warn({ givenBack }, 'gave back claims whose answer was lost');
      this.claimCut = false;
    }
    if (nowMs - this.lastAbandonedSweep >= this.pollIntervalMs) {
      this.lastAbandonedSweep = nowMs;
      // The sweep never holds up the claim: a row it cannot settle is that row's fault.
      try {
        const lost = await this.recorder.deadLetterAbandoned(this.id, aliveSince, staleBefore);
        const message = 'dead-lettered deliveries whose attempts kept dying with their worker';
        if (lost > 0) logger.warn({ lost }, message);
      } catch (error) {
        logger.warn({ err: error }, 'finding crash loops failed; the next sweep tries again');
      }
    }
    const { runningBySubscription, runningByTenant } = this.claims;
    const skip = [...runningBySubscription]
      .filter(([id, count]) => count > this.levels(id).reopen)
      .map(([id]) => id);
    skip.push(...this.holds.held(nowMs));
    // The same one level up: one tenant's hung endpoints cannot hold another tenant's slots.
    const plan = tenantClaimPlan(runningByTenant, this.maxRunning, this.maxPerSubscription);
    const claimed = await queue.claim(now, limit, {
      workerId: this.id,
      aliveSince,
      staleBefore,
      rowsPerSubscription: this.claimPerSubscription,
      paceHorizonUs: this.pacer.horizonUs(nowMs),
      skip,
      tenantRoom: plan.room,
      newcomerRoom: plan.newcomerRoom,
      skipTenants: plan.skip,
      settled: this.claims.settledIds(),
    });
    if (claimed.length === 0) return false;
    const running = this.claims.claimed(claimed);
    this.emit('claimed', claimed);
    const slots = await this.pacer.reserve(claimed, this.deps.clock.now().getTime());
    for (const [i, delivery] of claimed.entries()) {
      this.runDelivery(delivery, slots.get(delivery.id), running[i]);
    }
    return mayHaveMore(claimed, limit, {
      plan,
      levels: (id) => this.levels(id),
      runningBySubscription,
      runningByTenant,
      maxRunning: this.maxRunning,
      maxPerSubscription: this.maxPerSubscription,
    });
  }

  /** A subscription's levels here, from the limit its latest claim read. */
  private levels(id: string) {
    return subscriptionLevels(this.claims.limitOf(id) ?? this.maxPerSubscription);
  }

  /**
   * Runs a claimed row's delivery (see deliver). One that throws before it settles is given back,
   * or its row would stay claimed here, unsent, until this worker stops. `slot`: its send slot,
   * null when none could be reserved, undefined when its subscription has no cap; `running`: its
   * subscription's attempts running here once it was claimed, itself included.
   */
  private runDelivery(
    delivery: ClaimedDelivery,
    slot: PaceSlot | null | undefined,
    running: number,
  ): void {
    this.deliver(delivery, slot, running).catch((error) => {
      const nextAttemptAt = this.deps.clock.now().toISOString();
      const givenBack = this.settle({ givenBack: { delivery, nextAttemptAt } });
      this.deps.logger.error(
        { err: error, deliveryId: delivery.id, givenBack },
        'delivery failed on our side',
      );
      if (givenBack) this.emit('givenBack', delivery);
    });
  }

  /**
   * One delivery's line in this worker: claimed, started (see startAt), sent, settled; or given
   * back unsent. A hold the answer asks for applies here before anything else can start, and is
   * told to every other process.
   */
  private async deliver(
    delivery: ClaimedDelivery,
    slot: PaceSlot | null | undefined,
    running: number,
  ): Promise<void> {
    const settlement = await this.settlementOf(delivery, slot, running);
    const holdUntil = 'attempt' in settlement ? settlement.attempt.holdUntil : null;
    if (holdUntil !== null) this.tellHold(delivery.subscriptionId, holdUntil);
    this.settle(settlement);
    if ('attempt' in settlement) this.emit('attempted', settlement.attempt);
    else this.emit('givenBack', delivery);
  }

  /** The attempt's outcome (see Recorder.attempted), or the row given back without one. */
  private async settlementOf(
    delivery: ClaimedDelivery,
    slot: PaceSlot | null | undefined,
    running: number,
  ): Promise<Settlement> {
    const { clock } = this.deps;
    const givenBack = (at: Date) => ({ givenBack: { delivery, nextAttemptAt: at.toISOString() } });
    if (slot === null) return givenBack(clock.now());
    const start = await this.startAt(delivery, slot);
    if ('giveBack' in start) return givenBack(start.giveBack);
    this.emit('started', delivery, start.at, slot?.atMs ?? null);
    const began = performance.now();
    let result: SendResult;
    try {
      result = await this.attempts.run(delivery, start.at);
    } catch (error) {
      this.deps.logger.error(
        { err: error, subscriptionId: delivery.subscriptionId, deliveryId: delivery.id },
        'delivery attempt failed on our side',
      );
      result = INTERNAL_FAILURE;
    }
    const attempt = this.recorder.attempted(delivery, result, {
      startedAt: start.at.toISOString(),
      durationMs: Math.round(performance.now() - began),
      endedAt: clock.now(),
      running,
    });
    return { attempt };
  }

  /**
   * Settles a running claim in this worker's claims (whose recording follows); the slots it frees
   * may reopen claims. Whether it was still running (a second settlement changes nothing).
   */
  private settle(settlement: Settlement): boolean {
    const left = this.claims.settled(settlement);
    if (left === null) return false;
    // Down to its low level the subscription is claimed for at once; at its reopen level with
    // the claim deferred briefly, so that other subscriptions reopening join the same claim.
    const signal = reopening(left, this.maxRunning, this.maxPerSubscription);
    if (signal === 'low') this.wakes.low();
    else if (signal === 'reopened') this.wakes.reopened();
    return true;
  }

  /**
   * When the attempt starts: at its send slot and its turn (see Pacer.turn), after its endpoint's
   * hold is checked again. Or when it is given back for: a hold's end, or now when stopping, or
   * when its slot was missed beside other workers.
   */
  private async startAt(
    delivery: ClaimedDelivery,
    slot: PaceSlot | undefined,
  ): Promise<{ at: Date } | { giveBack: Date }> {
    const { clock } = this.deps;
    let wakeAt = slot?.atMs;
    for (;;) {
      if (wakeAt !== undefined) await this.wakes.until(wakeAt);
      await this.wakes.afterReads();
      const id = delivery.subscriptionId;
      const heldUntil = await this.holds.atStart(id, clock, this.readsStoredHolds());
      if (heldUntil !== null) return { giveBack: new Date(heldUntil) };
      const now = clock.now();
      if (slot === undefined) return { at: now };
      if (this.stopping()) return { giveBack: now };
      const turn = this.pacer.turn(delivery, slot, now.getTime());
      if (turn === 'go') return { at: now };
      if (turn === 'late') return { giveBack: now };
      wakeAt = turn;
    }
  }

  /**
   * On the embedded database a hold notice reaches only this process (and `serve --processes`
   * siblings): while another worker lives, starts read the holds other recorders store at once
   * (see StoredHolds). PostgreSQL's notices reach every process.
   */
  private readsStoredHolds(): boolean {
    return this.deps.database.dialect === 'sqlite' && this.registry.othersAlive;
  }

  /** Holds the endpoint here at once, and tells every other process (before it is recorded). */
  private tellHold(subscriptionId: string, holdUntil: string): void {
    const until = Date.parse(holdUntil);
    this.holds.hold(subscriptionId, until);
    this.deps.notifier
      .publish(HOLDS_CHANNEL, JSON.stringify({ subscriptionId, until }))
      .catch((error) => this.deps.logger.warn({ err: error }, 'hold notice not sent'));
  }
}
