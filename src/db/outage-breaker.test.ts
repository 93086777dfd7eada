import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it, mock } from 'node:test';
import type pg from 'pg';
import { DatabaseOutage, OutageBreaker, type Probe, type WatchedWaits } from './outage-breaker.ts';

// The breaker's decisions on an injected clock: when it opens, what it fails and how, and when it
// closes. test/dependency-faults.test.ts freezes a real server and checks which way each request
// was answered; the timing is proven here, where no machine's load can move it.

const OPTIONS = { probeAfterMs: 500, outageAfterMs: 1_000, probeTimeoutMs: 500, checkEveryMs: 100 };

/** A server that answers probes, or, frozen, lets each one wait (as ProbeConnection sees it). */
class FakeProbe implements Probe {
  frozen = false;
  asked = 0;
  private sentAt: number | null = null;

  ask(now: number): 'answered' | 'waiting' | 'unanswered' {
    this.asked += 1;
    if (!this.frozen) {
      this.sentAt = null;
      return 'answered';
    }
    this.sentAt ??= now;
    return now - this.sentAt < OPTIONS.probeTimeoutMs ? 'waiting' : 'unanswered';
  }

  close(): void {}
}

class FakeWaits implements WatchedWaits {
  oldest: number | null = null;
  cuts = 0;
  oldestWaitSince(): number | null {
    return this.oldest;
  }
  cutWaits(): void {
    this.cuts += 1;
    this.oldest = null;
  }
}

/** A pool whose checkouts wait for ever (every connection stuck on a frozen server). */
const stuckPool = { connect: () => new Promise(() => undefined) } as unknown as pg.Pool;

describe('OutageBreaker: fail fast while the database does not answer', () => {
  let clock: number;
  let probe: FakeProbe;
  let waits: FakeWaits;
  let breaker: OutageBreaker;

  beforeEach(() => {
    mock.timers.enable({ apis: ['setInterval'] });
    clock = 0;
    probe = new FakeProbe();
    waits = new FakeWaits();
    breaker = new OutageBreaker(probe, waits, { ...OPTIONS, now: () => clock });
  });
  afterEach(() => {
    breaker.close();
    mock.timers.reset();
  });

  /** Moves the clock one check at a time until `until` is true; the clock then. */
  const advanceUntil = (until: () => boolean, most = 60_000): number => {
    while (!until()) {
      assert.ok(clock < most, 'never happened');
      clock += OPTIONS.checkEveryMs;
      mock.timers.tick(OPTIONS.checkEveryMs);
    }
    return clock;
  };

  it('opens once a statement has waited outageAfterMs beside an unanswered probe, not before', () => {
    probe.frozen = true;
    waits.oldest = 0;
    const openedAt = advanceUntil(() => breaker.open);
    assert.equal(openedAt, OPTIONS.outageAfterMs);
    assert.equal(waits.cuts, 1, 'the waits are cut as it opens');
  });

  it('cuts a checkout waiting for a connection, and fails every later one at once', async () => {
    probe.frozen = true;
    const waiting = breaker.checkout(stuckPool);
    advanceUntil(() => breaker.open);
    assert.equal(clock, OPTIONS.outageAfterMs);
    await assert.rejects(waiting, (error: unknown) => (error as DatabaseOutage).way === 'cut');
    await assert.rejects(breaker.checkout(stuckPool), (error: unknown) => {
      assert.ok(error instanceof DatabaseOutage);
      return error.way === 'at_once';
    });
  });

  it('asks the probe only once a wait reaches probeAfterMs', () => {
    waits.oldest = 0;
    advanceUntil(() => clock >= OPTIONS.probeAfterMs - OPTIONS.checkEveryMs);
    assert.equal(probe.asked, 0);
    advanceUntil(() => probe.asked > 0);
    assert.equal(clock, OPTIONS.probeAfterMs);
  });

  it('never takes a slow statement on an answering server for an outage', () => {
    waits.oldest = 0;
    advanceUntil(() => clock >= 10_000);
    assert.equal(breaker.open, false);
    assert.equal(waits.cuts, 0);
  });

  it('closes at the first check after a probe is answered again', () => {
    probe.frozen = true;
    waits.oldest = 0;
    advanceUntil(() => breaker.open);
    advanceUntil(() => clock >= 5_000);
    assert.equal(breaker.open, true, 'open while the server stays frozen');
    probe.frozen = false;
    const thawedAt = clock;
    const closedAt = advanceUntil(() => !breaker.open);
    assert.equal(closedAt - thawedAt, OPTIONS.checkEveryMs);
  });
});
