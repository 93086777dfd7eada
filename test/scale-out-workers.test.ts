import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { attemptLog, mostWithin } from './helpers/attempt-log.ts';
import { BACKENDS } from './helpers/context.ts';
import { deliveryRows } from './helpers/delivery-rows.ts';
import { createTenant } from './helpers/fixtures.ts';
import { type ChildService, startTourops } from './helpers/processes.ts';
import { until } from './helpers/until.ts';
import { gaps, localPorts, type Setup, setUp, WORKER_READY } from './helpers/worker-processes.ts';

// Real `tourops worker` processes side by side on one PostgreSQL, as users scale out.

if (BACKENDS.includes('postgres')) {
  describe('two tourops worker processes on one PostgreSQL', () => {
    const EVENTS = 1_000;
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
      await s.receiver.waitFor(EVENTS * paths.length);
      // Every row recorded: no claim is held any more, so no send (a duplicate) can follow.
      await until(async () => {
        const open = await deliveryRows(s.ctx.runtime.database.db)
          .select('id')
          .where('tenantId', '=', s.tenant.id)
          .where('status', '!=', 'success')
          .limit(1)
          .execute();
        return open.length === 0 ? true : undefined;
      }, 'every delivery recorded');

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
      const counts = await deliveryRows(s.ctx.runtime.database.db)
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
      // Four seconds' worth at the cap, from the product's record: in every sliding second at
      // most the cap started, whichever worker started it (the pace's floor, no gap between
      // slots, is src/delivery/admission.test.ts's, with an injected clock).
      const log = await until(async () => {
        const rows = await attemptLog(s.ctx.runtime.database.db, created.json().data.id);
        return rows.length >= 40 ? rows : undefined;
      }, 'forty capped attempts');
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
