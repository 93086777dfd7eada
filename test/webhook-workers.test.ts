import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { attemptLog, mostWithin, startsAfter } from './helpers/attempt-log.ts';
import { BACKENDS } from './helpers/context.ts';
import { deliveryRows } from './helpers/delivery-rows.ts';
import type { ReceivedRequest } from './helpers/https-receiver.ts';
import { startTourops } from './helpers/processes.ts';
import { until } from './helpers/until.ts';
import { gaps, localPorts, type Setup, setUp, WORKER_READY } from './helpers/worker-processes.ts';

// `tourops worker` as operators run it: real OS processes, killed and stopped for real.

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** WEBHOOK_WORKER_DEAD_AFTER for these workers: short, so a takeover is seconds away. */
const DEAD_AFTER_MS = 1_500;

/** A subscription's in-flight rows with the worker that claimed each. */
const claimsOf = (s: Setup, subscriptionId: string) =>
  deliveryRows(s.ctx.runtime.database.db)
    .select(['id', 'status', 'claimedBy', 'claimedAt'])
    .where('subscriptionId', '=', subscriptionId)
    .where('status', '=', 'in_flight')
    .execute();

/** A worker's last heartbeat in the registry (epoch ms). */
const heartbeatOf = async (s: Setup, workerId: string | null) => {
  const row = await s.ctx.runtime.database.db
    .selectFrom('webhookWorkers')
    .select('heartbeatAt')
    .where('id', '=', workerId ?? '')
    .executeTakeFirstOrThrow();
  return Date.parse(row.heartbeatAt);
};
// Two at a time: each test runs several processes, and a loaded machine slows them all.
describe('tourops worker processes', { concurrency: 2 }, () => {
  for (const backend of BACKENDS) {
    it(`a killed worker's attempt is sent again by another once its heartbeat is old, never while it lives (${backend})`, async (t) => {
      // An attempt time-out far longer than the heartbeat's grace: the hung attempt outlives it.
      const s = await setUp(backend, 60_000);
      t.after(() => s.close());
      const env = { ...s.env, WEBHOOK_WORKER_DEAD_AFTER: `${DEAD_AFTER_MS}ms` };
      const crash = await s.subscribe('/crash');
      await s.subscribe('/marker');
      // The first request to /crash never gets an answer: its worker is killed while it waits.
      let sends = 0;
      s.receiver.respond((r) => (r.path === '/crash' && ++sends === 1 ? 'hang' : { status: 204 }));
      const first = await startTourops(['worker'], env, WORKER_READY);
      await s.createClient('Crash');
      const [hung] = await s.receiver.waitFor(1);
      const sendsOf = (request: ReceivedRequest) =>
        s.receiver.requests.filter(
          (r) =>
            r.path === request.path &&
            r.headers['service-event-id'] === request.headers['service-event-id'],
        );
      const second = await startTourops(['worker'], env, WORKER_READY);
      try {
        const [claim] = await claimsOf(s, crash);
        assert.equal(claim.status, 'in_flight');
        // The claim's age passes the grace while its worker lives (a floor of time, not a bound).
        await sleep(2 * DEAD_AFTER_MS);
        // Then markers until the second worker sends one: its claim, which takes over abandoned
        // rows in the same statement, ran after the grace and left the live worker's row alone.
        const secondPorts = () => localPorts(second.child.pid ?? 0) ?? new Set<number>();
        const markers = () => s.receiver.requests.filter((r) => r.path === '/marker');
        for (let sent = 1; ; sent++) {
          await s.createClient(`Marker ${sent}`);
          // Counted from what was sent, not from what had arrived once the write returned: both of
          // a marker's requests may come before that. The hung one and the Crash event's to
          // /marker, then two a marker, one to each path.
          await s.receiver.waitFor(2 + 2 * sent);
          const ports = secondPorts();
          if (markers().some((r) => ports.has(r.remotePort))) break;
          assert.ok(sent < 50, 'no marker was sent by the second worker');
        }
        assert.equal(sendsOf(hung).length, 1, "a live worker's attempt was sent again");
        const [stillClaimed] = await claimsOf(s, crash);
        assert.deepEqual(stillClaimed, claim, 'the first worker still holds its claim');

        assert.equal(await first.stop('SIGKILL'), null, 'killed, no exit code');
        await until(() => (sendsOf(hung).length === 2 ? true : undefined), 'sent again');
        const retried = sendsOf(hung)[1];
        // The attempt cut off never counted as made: the same attempt, sent again.
        assert.equal(retried.headers['service-delivery-attempt'], '1');
        assert.equal(retried.body.slice(0, 60), hung.body.slice(0, 60));
        const log = await until(async () => {
          const rows = (await attemptLog(s.ctx.runtime.database.db, crash)).filter(
            (a) => a.deliveryId === claim.id,
          );
          return rows.length > 0 ? rows : undefined;
        }, 'the retried delivery recorded');
        // From the product's record: taken over only once the dead worker's heartbeat was old.
        const lastBeat = await heartbeatOf(s, claim.claimedBy);
        assert.deepEqual(
          log.map((a) => [a.attempt, a.status]),
          [[1, 204]],
        );
        assert.ok(
          log[0].startMs >= lastBeat + DEAD_AFTER_MS,
          `taken over ${log[0].startMs - lastBeat} ms after the last heartbeat`,
        );
        assert.equal((await s.delivery(crash)).status, 'success');
      } catch (error) {
        // What the workers logged (warnings and up) says why, when a wait gives up.
        t.diagnostic(`first worker:\n${first.output()}\nsecond worker:\n${second.output()}`);
        throw error;
      } finally {
        await first.stop('SIGKILL');
        assert.equal(await second.stop(), 0);
      }
    });

    it(`a last attempt cut off by a kill is sent again after a restart, never dead-lettered (${backend})`, async (t) => {
      const s = await setUp(backend, 60_000);
      t.after(() => s.close());
      const subscriptionId = await s.subscribe('/restart');
      // Two attempts in all: the first fails, the last never gets an answer from the worker that
      // sent it; once sent again it succeeds.
      let lastSends = 0;
      s.receiver.respond((r) => {
        if (r.headers['service-delivery-attempt'] === '1') return { status: 500 };
        lastSends += 1;
        return lastSends === 1 ? 'hang' : { status: 204 };
      });
      const env = {
        ...s.env,
        WEBHOOK_RETRY_SCHEDULE: '1s',
        WEBHOOK_WORKER_DEAD_AFTER: `${DEAD_AFTER_MS}ms`,
      };
      const first = await startTourops(['worker'], env, WORKER_READY);
      await s.createClient('Restart');
      const [failed, hung] = await s.receiver.waitFor(2);
      assert.equal(hung.headers['service-delivery-attempt'], '2');
      const [claim] = await claimsOf(s, subscriptionId);
      assert.equal(await first.stop('SIGKILL'), null);
      const second = await startTourops(['worker'], env, WORKER_READY);
      try {
        const [, , retried] = await s.receiver.waitFor(3);
        assert.equal(retried.headers['service-event-id'], failed.headers['service-event-id']);
        assert.equal(retried.headers['service-delivery-attempt'], '2');
        const done = await until(async () => {
          const row = await s.delivery(subscriptionId);
          return row.status === 'in_flight' || row.status === 'pending' ? undefined : row;
        }, 'the last attempt recorded');
        assert.equal(done.status, 'success', JSON.stringify(done));
        assert.equal(done.attempts, 2);
        const log = await attemptLog(s.ctx.runtime.database.db, subscriptionId);
        assert.deepEqual(
          log.map((a) => [a.attempt, a.status]),
          [
            [1, 500],
            [2, 204],
          ],
        );
        const lastBeat = await heartbeatOf(s, claim.claimedBy);
        assert.ok(log[1].startMs >= lastBeat + DEAD_AFTER_MS, 'taken over once the beat was old');
      } finally {
        assert.equal(await second.stop(), 0);
      }
    });

    it(`tourops serve --processes 2 keeps maxPerSecond and a hold between its processes (${backend})`, async (t) => {
      const s = await setUp(backend);
      t.after(() => s.close());
      const CAP = 10;
      const EVENTS = 40;
      const subscriptionId = await s.subscribe('/paced', { maxPerSecond: CAP });
      let answered = 0;
      s.receiver.respond(() => {
        answered += 1;
        if (answered === 12) return { status: 429, headers: { 'retry-after': '1' } };
        return { status: 200, delayMs: 20 };
      });
      // The backlog first: both processes claim for it from their first second.
      for (let i = 0; i < EVENTS; i += 8) {
        await Promise.all(Array.from({ length: 8 }, (_, k) => s.createClient(`Paced ${i + k}`)));
      }
      // The 429's delivery retried a second later, not a minute.
      const server = await startTourops(['serve', '--processes', '2'], {
        ...s.env,
        WEBHOOK_RETRY_SCHEDULE: '1s',
      });
      try {
        const log = await until(async () => {
          const rows = await attemptLog(s.ctx.runtime.database.db, subscriptionId);
          return rows.filter((a) => a.status === 200).length >= EVENTS ? rows : undefined;
        }, `${EVENTS} paced deliveries`);
        const starts = log.map((a) => a.startMs);
        assert.ok(
          mostWithin(starts) <= CAP,
          `${mostWithin(starts)} started within one second: ${gaps(starts)}`,
        );
        // The receiver's own count (cap plus one) is checked where it shares the worker's process
        // (test/delivery-promises.test.ts): here it lives in the test process, whose pauses under
        // the other tests' load bunch its arrival times, not the sends.
        // The 429's own process holds at once, the other within 100 ms of hearing of it.
        const [refused] = log.filter((a) => a.status === 429);
        assert.ok(refused, 'a 429 recorded');
        assert.deepEqual(
          startsAfter(log, refused, 100, 990),
          [],
          'attempts started during the hold, ms after the 429',
        );
      } finally {
        assert.equal(await server.stop(), 0, server.output());
      }
    });

    it(`a serving process and a separate worker hold an endpoint for each other's 429 (${backend})`, async (t) => {
      const s = await setUp(backend);
      t.after(() => s.close());
      const CAP = 10;
      const EVENTS = 45;
      const subscriptionId = await s.subscribe('/held', { maxPerSecond: CAP });
      // A hold every ninth answer: each a chance for the process that did not get the 429 to start
      // one anyway, its rows claimed and waiting for their send slots.
      let answered = 0;
      s.receiver.respond(() => {
        answered += 1;
        if (answered % 9 === 5) return { status: 429, headers: { 'retry-after': '1' } };
        return { status: 200, delayMs: 20 };
      });
      for (let i = 0; i < EVENTS; i += 9) {
        await Promise.all(Array.from({ length: 9 }, (_, k) => s.createClient(`Held ${i + k}`)));
      }
      // Retries a second later (a delivery may meet a second 429).
      const env = { ...s.env, WEBHOOK_RETRY_SCHEDULE: '1s,1s,1s' };
      const [server, worker] = await Promise.all([
        startTourops(['serve'], env),
        startTourops(['worker'], env, WORKER_READY),
      ]);
      try {
        const log = await until(async () => {
          const rows = await attemptLog(s.ctx.runtime.database.db, subscriptionId);
          return rows.filter((a) => a.status === 200).length >= EVENTS ? rows : undefined;
        }, `${EVENTS} held deliveries`);
        const refusals = log.filter((a) => a.status === 429);
        assert.ok(refusals.length >= 2, `${refusals.length} 429s recorded`);
        for (const refused of refusals) {
          assert.deepEqual(
            startsAfter(log, refused, 100, 990),
            [],
            'attempts started during the hold, ms after the 429',
          );
        }
      } finally {
        assert.equal(await worker.stop(), 0, worker.output());
        assert.equal(await server.stop(), 0, server.output());
      }
    });

    it(`SIGTERM lets the running attempt finish and records it, then exits 0 (${backend})`, async (t) => {
      const s = await setUp(backend);
      t.after(() => s.close());
      const subscriptionId = await s.subscribe('/slow');
      s.receiver.respond(() => ({ status: 200, delayMs: 1_000 }));
      const worker = await startTourops(['worker'], s.env, WORKER_READY);
      await s.createClient('Slow');
      const [request] = await s.receiver.waitFor(1);
      assert.equal((await s.delivery(subscriptionId)).status, 'in_flight');
      assert.equal(await worker.stop('SIGTERM'), 0, worker.output());
      const stoppedAfter = performance.now() - request.receivedAt;
      assert.ok(stoppedAfter >= 900, `exited ${Math.round(stoppedAfter)} ms after the request`);
      const row = await s.delivery(subscriptionId);
      assert.equal(row.status, 'success');
      assert.equal(row.attempts, 1);
      assert.equal(row.lastResponseStatus, 200);
    });
  }
});
