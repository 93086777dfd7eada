import assert from 'node:assert/strict';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { DEAD_AFTER_MS } from '../src/delivery/registry.ts';
import { attemptLog, mostWithin, startsAfter } from './helpers/attempt-log.ts';
import { BACKENDS, createTestContext, type TestContext } from './helpers/context.ts';
import { createTenant, type TenantFixture } from './helpers/fixtures.ts';
import { HttpsReceiver, testCa } from './helpers/https-receiver.ts';
import { type ChildService, startTourops } from './helpers/processes.ts';
import { until } from './helpers/until.ts';

// `tourops worker` as operators run it: real OS processes, killed and stopped for real.

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Milliseconds between consecutive times, for a failure's message. */
const gaps = (times: number[]) =>
  [...times]
    .sort((a, b) => a - b)
    .map((at, i, all) => Math.round(at - (all[i - 1] ?? at)))
    .join(' ');

const WORKER_READY = 'Webhook delivery worker running';

/** Local TCP ports of a process's sockets (Linux /proc), or null where /proc is missing. */
function localPorts(pid: number): Set<number> | null {
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return null;
  }
  const inodes = new Set<string>();
  for (const fd of fds) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match) inodes.add(match[1]);
    } catch {
      // closed meanwhile
    }
  }
  const ports = new Set<number>();
  for (const table of ['tcp', 'tcp6']) {
    for (const line of readFileSync(`/proc/${pid}/net/${table}`, 'utf8').split('\n').slice(1)) {
      const columns = line.trim().split(/\s+/);
      if (columns.length > 9 && inodes.has(columns[9])) {
        ports.add(Number.parseInt(columns[1].split(':')[1], 16));
      }
    }
  }
  return ports;
}

interface Setup {
  ctx: TestContext;
  tenant: TenantFixture;
  receiver: HttpsReceiver;
  env: Record<string, string>;
  subscribe(path: string): Promise<string>;
  createClient(name: string): Promise<void>;
  delivery(subscriptionId: string): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

/** `timeoutMs`: the attempt time-out, longer than DEAD_AFTER_MS where an attempt must outlive it. */
async function setUp(backend: (typeof BACKENDS)[number], timeoutMs = 10_000): Promise<Setup> {
  const ca = await testCa();
  const webhookEnv = {
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    WEBHOOK_CA_FILE: ca.caFile,
    WEBHOOK_TIMEOUT_MS: String(timeoutMs),
  };
  const ctx = await createTestContext(backend, { env: webhookEnv });
  const tenant = await createTenant(ctx, { tier: 'enterprise' });
  const receiver = await HttpsReceiver.start();
  return {
    ctx,
    tenant,
    receiver,
    env: { ...ctx.env, LOG_LEVEL: 'warn' },
    async subscribe(path) {
      const response = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: receiver.url(path), events: ['client.created'] },
      });
      assert.equal(response.statusCode, 201, response.body);
      return response.json().data.id;
    },
    async createClient(displayName) {
      const response = await ctx.api('POST', '/api/v1/clients', {
        token: tenant.token,
        body: { kind: 'individual', displayName },
      });
      assert.equal(response.statusCode, 201, response.body);
    },
    async delivery(subscriptionId) {
      const response = await ctx.api('GET', `/api/v1/webhooks/${subscriptionId}/deliveries`, {
        token: tenant.token,
      });
      const [row] = response.json().data as Array<Record<string, unknown>>;
      return row;
    },
    async close() {
      await receiver.close();
      await ctx.close();
    },
  };
}

// Two at a time: each test runs several processes, and a loaded machine slows them all.
describe('tourops worker processes', { concurrency: 2 }, () => {
  for (const backend of BACKENDS) {
    it(`a killed worker's attempt is sent again within 15 s by another, never while it lives (${backend})`, async (t) => {
      // A time-out far longer than DEAD_AFTER_MS: the hung attempt outlives a heartbeat's grace.
      const s = await setUp(backend, 60_000);
      t.after(() => s.close());
      const subscriptionId = await s.subscribe('/crash');
      // The first attempt never gets an answer: its worker is killed while it waits.
      s.receiver.respond((r) =>
        r.headers['service-delivery-attempt'] === '1' ? 'hang' : { status: 204 },
      );
      const first = await startTourops(['worker'], s.env, WORKER_READY);
      await s.createClient('Crash');
      const [hung] = await s.receiver.waitFor(1, 5_000);
      const second = await startTourops(['worker'], s.env, WORKER_READY);
      try {
        // The first worker lives, its claim older than any heartbeat's grace: never taken.
        await sleep(DEAD_AFTER_MS + 2_500);
        assert.equal(s.receiver.requests.length, 1, "a live worker's attempt was sent again");
        const claimed = await s.delivery(subscriptionId);
        assert.equal(claimed.status, 'in_flight', JSON.stringify(claimed));
        assert.equal(claimed.attempts, 1);

        const killedAt = performance.now();
        assert.equal(await first.stop('SIGKILL'), null, 'killed, no exit code');
        const [, retried] = await s.receiver.waitFor(2, 20_000);
        const after = retried.receivedAt - killedAt;
        assert.ok(after < 15_000, `sent again ${Math.round(after)} ms after the kill`);
        assert.equal(retried.headers['service-event-id'], hung.headers['service-event-id']);
        assert.equal(retried.headers['service-delivery-attempt'], '2');
        assert.equal(retried.body.slice(0, 60), hung.body.slice(0, 60));
        const done = await until(
          async () => {
            const row = await s.delivery(subscriptionId);
            return row.status === 'success' ? row : undefined;
          },
          5_000,
          'the retried delivery recorded',
        );
        assert.equal(done.attempts, 2);
        assert.equal(done.lastResponseStatus, 204);
        assert.equal(s.receiver.requests.length, 2);
      } finally {
        await first.stop('SIGKILL');
        assert.equal(await second.stop(), 0);
      }
    });

    it(`a killed worker's attempt is sent again within 15 s of its restart (${backend})`, async (t) => {
      const s = await setUp(backend, 60_000);
      t.after(() => s.close());
      await s.subscribe('/restart');
      s.receiver.respond((r) =>
        r.headers['service-delivery-attempt'] === '1' ? 'hang' : { status: 204 },
      );
      const first = await startTourops(['worker'], s.env, WORKER_READY);
      await s.createClient('Restart');
      const [hung] = await s.receiver.waitFor(1, 5_000);
      assert.equal(await first.stop('SIGKILL'), null);
      const restartedAt = performance.now();
      const second = await startTourops(['worker'], s.env, WORKER_READY);
      try {
        const [, retried] = await s.receiver.waitFor(2, 20_000);
        const after = retried.receivedAt - restartedAt;
        assert.ok(after < 15_000, `sent again ${Math.round(after)} ms after the restart`);
        assert.equal(retried.headers['service-event-id'], hung.headers['service-event-id']);
      } finally {
        assert.equal(await second.stop(), 0);
      }
    });

    it(`tourops serve --processes 2 keeps maxPerSecond and a hold between its processes (${backend})`, async (t) => {
      const s = await setUp(backend);
      t.after(() => s.close());
      const CAP = 10;
      const EVENTS = 40;
      const created = await s.ctx.api('POST', '/api/v1/webhooks', {
        token: s.tenant.token,
        body: { url: s.receiver.url('/paced'), events: ['client.created'], maxPerSecond: CAP },
      });
      assert.equal(created.statusCode, 201, created.body);
      const subscriptionId = created.json().data.id;
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
        const log = await until(
          async () => {
            const rows = await attemptLog(s.ctx.runtime.database.db, subscriptionId);
            return rows.filter((a) => a.status === 200).length >= EVENTS ? rows : undefined;
          },
          30_000,
          `${EVENTS} paced deliveries`,
        );
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

    it(`SIGTERM lets the running attempt finish and records it, then exits 0 (${backend})`, async (t) => {
      const s = await setUp(backend);
      t.after(() => s.close());
      const subscriptionId = await s.subscribe('/slow');
      s.receiver.respond(() => ({ status: 200, delayMs: 1_000 }));
      const worker = await startTourops(['worker'], s.env, WORKER_READY);
      await s.createClient('Slow');
      const [request] = await s.receiver.waitFor(1, 5_000);
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

if (BACKENDS.includes('postgres')) {
  describe('two tourops worker processes on one PostgreSQL', () => {
    const EVENTS = 2_000;
    let s: Setup;
    let workers: ChildService[];

    before(async () => {
      s = await setUp('postgres');
      workers = await Promise.all([
        startTourops(['worker'], s.env, WORKER_READY),
        startTourops(['worker'], s.env, WORKER_READY),
      ]);
    });
    after(async () => {
      for (const worker of workers) await worker.stop();
      await s.close();
    });

    it(`deliver ${EVENTS} events to two subscriptions: every delivery arrives once`, async () => {
      const paths = ['/a', '/b'];
      for (const path of paths) await s.subscribe(path);
      // Receivers answer after a little work, as real ones do; the workers claim side by side.
      s.receiver.respond(() => ({ status: 200, delayMs: 2 }));
      const writers = 8;
      await Promise.all(
        Array.from({ length: writers }, async (_, w) => {
          for (let i = w; i < EVENTS; i += writers) await s.createClient(`Client ${i}`);
        }),
      );
      await s.receiver.waitFor(EVENTS * paths.length, 60_000);
      // A little longer: a duplicate would arrive now.
      await new Promise((resolve) => setTimeout(resolve, 500));

      const events = await s.ctx.runtime.database.db
        .selectFrom('events')
        .select('id')
        .where('tenantId', '=', s.tenant.id)
        .where('type', '=', 'client.created')
        .execute();
      assert.equal(events.length, EVENTS);
      const expected = events.map((e) => e.id).sort();
      for (const path of paths) {
        const ids = s.receiver.requests
          .filter((r) => r.path === path)
          .map((r) => String(r.headers['service-event-id']));
        assert.equal(ids.length, EVENTS, `${path}: ${ids.length} requests`);
        assert.deepEqual(ids.sort(), expected, `${path}: each event exactly once`);
      }
      assert.ok(
        s.receiver.requests.every((r) => r.headers['service-delivery-attempt'] === '1'),
        'every delivery on its first attempt',
      );

      // Both processes did part of the work (their connections carried requests).
      const ports = workers.map((w) => localPorts(w.child.pid as number));
      if (ports.every((p) => p !== null)) {
        for (const [index, mine] of ports.entries()) {
          const served = s.receiver.requests.filter((r) => mine?.has(r.remotePort)).length;
          assert.ok(served > 0, `worker ${index + 1} delivered nothing`);
        }
      }
      const counts = await s.ctx.runtime.database.db
        .selectFrom('webhookDeliveries')
        .select(['status'])
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('tenantId', '=', s.tenant.id)
        .groupBy('status')
        .execute();
      assert.deepEqual(
        counts.map((c) => [c.status, Number(c.n)]),
        [['success', EVENTS * paths.length]],
      );
    });

    it('hold one subscription to its maxPerSecond between them', async () => {
      const other = await createTenant(s.ctx, { tier: 'enterprise' });
      const created = await s.ctx.api('POST', '/api/v1/webhooks', {
        token: other.token,
        body: { url: s.receiver.url('/capped'), events: ['client.created'], maxPerSecond: 10 },
      });
      assert.equal(created.statusCode, 201, created.body);
      s.receiver.respond(() => ({ status: 200 }));
      // Which worker sent what: each one's local ports, sampled all along (an idle connection
      // closes, and its port with it, long before the end).
      const portsOf = workers.map(() => new Set<number>());
      const sample = () =>
        workers.forEach((w, index) => {
          for (const port of localPorts(w.child.pid as number) ?? []) portsOf[index].add(port);
        });
      const sampler = setInterval(sample, 100).unref();
      // A backlog written at once: both workers claim for it as fast as they may.
      await Promise.all(
        Array.from({ length: 8 }, async (_, w) => {
          for (let i = w; i < 140; i += 8) {
            const written = await s.ctx.api('POST', '/api/v1/clients', {
              token: other.token,
              body: { kind: 'individual', displayName: `Capped ${i}` },
            });
            assert.equal(written.statusCode, 201, written.body);
          }
        }),
      );
      const capped = () =>
        s.receiver.requests.filter((r) => r.path === '/capped').map((r) => r.receivedAt);
      const first = await until(() => capped()[0], 10_000, 'a first delivery');
      await new Promise((resolve) => setTimeout(resolve, 10_500));
      const within = capped().filter((at) => at < first + 10_000).length;
      assert.ok(within <= 101, `${within} deliveries in 10 s`);
      assert.ok(within >= 80, `only ${within} deliveries in 10 s`);
      // In every sliding second at most the cap started (the attempt log).
      const log = await attemptLog(s.ctx.runtime.database.db, created.json().data.id);
      const starts = log.map((a) => a.startMs);
      assert.ok(
        mostWithin(starts) <= 10,
        `${mostWithin(starts)} started within 1 s: ${gaps(starts)}`,
      );
      clearInterval(sampler);
      sample();
      const sent = s.receiver.requests.filter((r) => r.path === '/capped');
      for (const [index, mine] of portsOf.entries()) {
        assert.ok(
          sent.some((r) => mine.has(r.remotePort)),
          `worker ${index + 1} sent none of them`,
        );
      }
    });
  });
}
