import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type RawBuilder, sql } from 'kysely';
import { loadConfig } from '../src/config.ts';
import { firstIdAt, newId } from '../src/lib/ids.ts';
import {
  PURGE_BATCH,
  type PurgeReport,
  RetentionService,
} from '../src/services/retention-service.ts';
import { startWorker } from '../src/start-worker.ts';
import { BACKENDS, createWebhookTestContext, type TestContext } from './helpers/context.ts';
import { createTenant, type TenantFixture } from './helpers/fixtures.ts';
import { HttpsReceiver } from './helpers/https-receiver.ts';
import { RetentionSeed, runSeed } from './helpers/retention-seed.ts';
import { eventually } from './helpers/until.ts';
import { WorkerMonitor } from './helpers/worker-monitor.ts';

const DAY = 86_400_000;

/** The same service over the same tables, `days` of retention, as seen `aheadMs` from now. */
function retentionAt(ctx: TestContext, aheadMs: number, days = 30): RetentionService {
  return new RetentionService({
    retention: ctx.runtime.repositories.retention,
    clock: { now: () => new Date(Date.now() + aheadMs) },
    days,
  });
}

const count = async (ctx: TestContext, query: RawBuilder<unknown>) =>
  Number(((await query.execute(ctx.runtime.database.db)).rows[0] as { n: number | string }).n);

async function createSubscription(ctx: TestContext, tenant: TenantFixture, url: string) {
  const created = await ctx.api('POST', '/api/v1/webhooks', {
    token: tenant.token,
    body: { url, events: ['client.created'] },
  });
  assert.equal(created.statusCode, 201, created.body);
  return created.json().data.id as string;
}

/** What an auto-pause does to the row (the queue keeps its pending deliveries). */
async function pause(ctx: TestContext, tenant: TenantFixture, id: string) {
  await ctx.runtime.repositories.webhooks.updateSubscription(tenant.id, id, {
    active: false,
    pausedAt: new Date().toISOString(),
  });
}

for (const backend of BACKENDS) {
  describe(`retention, end to end through the worker (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let receiver: HttpsReceiver;

    before(async () => {
      ctx = await createWebhookTestContext(backend, { WEBHOOK_RETRY_SCHEDULE: '20ms' });
      tenant = await createTenant(ctx, { tier: 'enterprise' });
      receiver = await HttpsReceiver.start({
        responder: (request) => ({ status: request.path === '/fail' ? 500 : 204 }),
      });
    });
    after(async () => {
      await receiver.close();
      await ctx.close();
    });

    it('deletes settled history past the period, keeps a paused backlog that still delivers', async () => {
      const ok = await createSubscription(ctx, tenant, receiver.url('/ok'));
      const failing = await createSubscription(ctx, tenant, receiver.url('/fail'));
      const paused = await createSubscription(ctx, tenant, receiver.url('/paused'));
      const deleted = await createSubscription(ctx, tenant, receiver.url('/deleted'));
      // Queued while no worker runs: then one subscription is paused and one deleted, with
      // their deliveries pending.
      for (const name of ['Ana', 'Rui']) {
        const response = await ctx.api('POST', '/api/v1/clients', {
          token: tenant.token,
          body: { kind: 'individual', displayName: name },
        });
        assert.equal(response.statusCode, 201);
      }
      await pause(ctx, tenant, paused);
      assert.equal(
        (await ctx.api('DELETE', `/api/v1/webhooks/${deleted}`, { token: tenant.token }))
          .statusCode,
        204,
      );
      await ctx.runtime.repositories.notifications.insertMany([
        {
          id: newId('ntf'),
          tenantId: tenant.id,
          memberId: tenant.ownerId,
          recipient: 'owner@example.test',
          kind: 'webhook_paused',
          subscriptionId: paused,
          createdAt: new Date().toISOString(),
        },
      ]);

      const worker = startWorker(ctx.runtime, { pollIntervalMs: 50 });
      const monitor = new WorkerMonitor(worker.worker);
      try {
        const deliveries = async (id: string) =>
          (
            await ctx.api('GET', `/api/v1/webhooks/${id}/deliveries?limit=100`, {
              token: tenant.token,
            })
          ).json().data as Array<{ id: string; status: string; eventId: string }>;
        await monitor.recorded(failing, 'dead_letter');
        await eventually(async () => {
          const all = [...(await deliveries(ok)), ...(await deliveries(failing))];
          return (
            all.filter((d) => d.status === 'success' || d.status === 'dead_letter').length === 4
          );
        }, 'four deliveries done');
        const deadLetter = (await deliveries(failing))[0];
        const attemptsUrl = `/api/v1/webhooks/${failing}/deliveries/${deadLetter.id}/attempts`;
        assert.equal(
          (await ctx.api('GET', attemptsUrl, { token: tenant.token })).json().data.length,
          2,
        );

        // Nothing is past the period yet.
        const now = await retentionAt(ctx, 0).purge({ pauseFactor: 0 });
        assert.deepEqual(
          [now?.deliveries, now?.events, now?.notifications],
          [0, 0, 0],
          'nothing younger than 30 days goes',
        );

        // 31 days on: the settled rows, the deleted subscription's backlog, the notification go;
        // the paused backlog and the events it still needs stay.
        const later = retentionAt(ctx, 31 * DAY);
        const report = (await later.purge({ pauseFactor: 0 })) as PurgeReport;
        assert.equal(report.deliveries, 6, '2 delivered, 2 dead letters, 2 of a deleted endpoint');
        assert.equal(report.notifications, 1);
        assert.deepEqual(await deliveries(ok), []);
        assert.deepEqual(await deliveries(failing), []);
        assert.equal(
          (await ctx.api('GET', attemptsUrl, { token: tenant.token })).statusCode,
          404,
          'the attempts went with their delivery',
        );
        assert.equal(
          await count(ctx, sql`select count(*) as n from webhook_attempts`),
          0,
          'no orphan attempt',
        );
        const kept = await deliveries(paused);
        assert.deepEqual(
          kept.map((d) => d.status),
          ['pending', 'pending'],
        );
        // Every event left is one a delivery needs (the two clients' events, for the backlog).
        assert.equal(
          await count(
            ctx,
            sql`select count(*) as n from events e where not exists (select 1 from webhook_deliveries d where d.event_id = e.id)`,
          ),
          0,
        );
        assert.equal(await count(ctx, sql`select count(*) as n from events`), 2);
        assert.equal((await later.purge({ pauseFactor: 0 }))?.deliveries, 0, 'a second purge');

        // The subscription rows stay; the paused one, re-enabled, delivers the kept backlog.
        const listed = await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token });
        assert.equal(
          listed.json().data.length,
          4,
          'every subscription row stays, the deleted one too',
        );
        // Counted before the enable: the backlog may arrive before the enable's answer does.
        const before = receiver.requests.length;
        await ctx.admin('POST', `/admin/v1/webhooks/${paused}/enable`);
        const arrived = await receiver.waitFor(before + 2);
        const backlog = arrived.filter((r) => r.path === '/paused');
        assert.deepEqual(
          backlog.map((r) => JSON.parse(r.body).id).sort(),
          kept.map((d) => d.eventId).sort(),
        );
      } finally {
        await worker.stop();
      }
    });
  });

  describe(`retention purge of 200k rows (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;

    before(async () => {
      ctx = await createWebhookTestContext(backend);
      tenant = await createTenant(ctx, { tier: 'enterprise' });
    });
    after(async () => ctx.close());

    it('deletes in short bounded statements while the API keeps writing, and keeps what is needed', async () => {
      const db = ctx.runtime.database.db;
      const url = 'https://127.0.0.1:9/never';
      const subs = [];
      for (let i = 0; i < 4; i++) subs.push(await createSubscription(ctx, tenant, url));
      const paused = await createSubscription(ctx, tenant, url);
      const deleted = await createSubscription(ctx, tenant, url);
      await pause(ctx, tenant, paused);
      await ctx.api('DELETE', `/api/v1/webhooks/${deleted}`, { token: tenant.token });

      const oldMs = Date.now() - 40 * DAY;
      const newMs = Date.now() - DAY;
      const recent = new Date(newMs).toISOString();
      const seed = new RetentionSeed(tenant.id);
      const seeding = performance.now();
      await runSeed(db, [
        // 200,000 settled deliveries of 50,000 old events (a quarter dead letters, each with an
        // attempt), and 1,000 old events no one subscribed to: all past retention.
        ...seed.pastRetention(oldMs, 200_000, subs),
        // A deleted subscription's old backlog: never to be sent, goes too.
        seed.events('gone', 500, oldMs),
        seed.deliveries(2, 'gone', 500, oldMs, () => sql`'pending'`, [deleted]),
        // Kept: a paused subscription's old backlog and its events, old rows a worker holds, and
        // everything recent.
        seed.events('keep', 500, oldMs),
        seed.deliveries(3, 'keep', 500, oldMs, () => sql`'pending'`, [paused]),
        seed.deliveries(4, 'keep', 10, oldMs, () => sql`'in_flight'`, [subs[0]]),
        seed.events('new', 500, newMs),
        seed.deliveries(5, 'new', 500, newMs, () => sql`'success'`, [subs[1]]),
        seed.attempts(5, 5, 500, newMs),
        seed.notifications(1, 2_000, oldMs),
        seed.notifications(2, 20, newMs),
      ]);
      const seededMs = performance.now() - seeding;
      if (backend === 'postgres') {
        // What autovacuum does to a table that grew: without statistics the planner takes the
        // purge's id range for a few rows and sorts all of it for every statement.
        await sql`analyze`.execute(db);
      }

      // During the purge, the API writes an event with four deliveries.
      const batches: number[] = [];
      let purgeDone = false;
      let write: Promise<boolean> | null = null;
      const report = (await ctx.runtime.services.retention.purge({
        pauseFactor: 0,
        onBatch: (_table, rows) => {
          batches.push(rows);
          write ??= ctx
            .api('POST', '/api/v1/clients', {
              token: tenant.token,
              body: { kind: 'individual', displayName: 'During the purge' },
            })
            .then((response) => {
              assert.equal(response.statusCode, 201);
              return !purgeDone;
            });
        },
      })) as PurgeReport;
      purgeDone = true;
      assert.equal(await write, true, 'a write went through while the purge ran');

      assert.deepEqual(
        {
          deliveries: report.deliveries,
          events: report.events,
          notifications: report.notifications,
        },
        { deliveries: 200_500, events: 51_500, notifications: 2_000 },
        `seeded in ${Math.round(seededMs)} ms, purged in ${report.ms} ms`,
      );
      assert.ok(Math.max(...batches) <= PURGE_BATCH, 'no statement deletes more than a batch');
      assert.ok(report.statements >= Math.ceil(254_000 / PURGE_BATCH));

      const left = (table: string, where = sql`1 = 1`) =>
        count(ctx, sql`select count(*) as n from ${sql.table(table)} where ${where}`);
      assert.equal(
        await left('webhook_deliveries', sql`status = 'pending' and subscription_id = ${paused}`),
        500,
      );
      assert.equal(await left('webhook_deliveries', sql`status = 'in_flight'`), 10);
      assert.equal(await left('webhook_deliveries', sql`created_at = ${recent}`), 500);
      assert.equal(await left('webhook_deliveries'), 1_010 + 4, 'and the 4 of the write');
      assert.equal(await left('webhook_attempts'), 500);
      assert.equal(await left('events', sql`id like 'evt-keep-%'`), 500);
      assert.equal(await left('events', sql`id like 'evt-new-%'`), 500);
      assert.equal(await left('events'), 1_001);
      assert.equal(await left('notifications'), 20);

      const again = (await ctx.runtime.services.retention.purge({ pauseFactor: 0 })) as PurgeReport;
      assert.equal(again.deliveries + again.events + again.notifications, 0);
    });
  });
}

describe('retention settings', () => {
  it('RETENTION_DAYS=0 keeps everything: no purge runs', async () => {
    const off = new RetentionService({
      // Never reached: a disabled service touches no table.
      retention: null as never,
      clock: { now: () => new Date() },
      days: 0,
    });
    assert.equal(off.enabled, false);
    assert.equal(await off.purge(), null);
  });

  it('RETENTION_DAYS is a whole number of days, 30 by default', () => {
    assert.equal(loadConfig({}).retentionDays, 30);
    assert.equal(loadConfig({ RETENTION_DAYS: '0' }).retentionDays, 0);
    assert.throws(() => loadConfig({ RETENTION_DAYS: '1.5' }), /RETENTION_DAYS/);
    assert.throws(() => loadConfig({ RETENTION_DAYS: '-1' }), /RETENTION_DAYS/);
  });
});

describe('the worker runs the purge on its timer', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createWebhookTestContext('sqlite');
  });
  after(async () => ctx.close());

  it('purges after its first delay, then at every interval, and counts the rows in /metrics', async () => {
    const tenant = await createTenant(ctx);
    const ntf = (ms: number) => ({
      id: `${firstIdAt('ntf', ms).slice(0, 14)}${newId('ntf').slice(-16)}`,
      tenantId: tenant.id,
      memberId: null,
      recipient: 'owner@example.test',
      kind: 'webhook_paused',
      subscriptionId: null,
      createdAt: new Date(ms).toISOString(),
    });
    await ctx.runtime.repositories.notifications.insertMany([
      ntf(Date.now() - 31 * DAY),
      ntf(Date.now() - 32 * DAY),
      ntf(Date.now()),
    ]);
    const worker = startWorker(ctx.runtime, {
      pollIntervalMs: 50,
      retention: { firstDelayMs: 0, intervalMs: 20 },
    });
    try {
      const reports: PurgeReport[] = [];
      await new Promise<void>((resolve) => {
        worker.sweeper.on('purged', (report) => {
          reports.push(report);
          if (reports.length === 2) resolve();
        });
      });
      assert.equal(reports[0].notifications, 2);
      assert.equal(reports[1].notifications, 0);
      const metrics = await ctx.runtime.metrics.render();
      assert.match(metrics, /tourops_retention_deleted_rows_total\{table="notifications"\} 2/);
    } finally {
      await worker.stop();
    }
  });
});
