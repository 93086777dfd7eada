import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { newId } from '../src/lib/ids.ts';
import { MAX_RECOVER } from '../src/services/deliveries-service.ts';
import { startWorker } from '../src/start-worker.ts';
import { cliHere } from './helpers/cli.ts';
import { BACKENDS, createWebhookTestContext, type TestContext } from './helpers/context.ts';
import { deliveryRows } from './helpers/delivery-rows.ts';
import { createTenant, type TenantFixture } from './helpers/fixtures.ts';
import { HttpsReceiver } from './helpers/https-receiver.ts';
import { eventually, until } from './helpers/until.ts';
import { WorkerMonitor } from './helpers/worker-monitor.ts';

const tourops = (args: string[], env: Record<string, string>) =>
  cliHere(args, { LOG_LEVEL: 'warn', ...env });

for (const backend of BACKENDS) {
  describe(`recovering dead letters (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let receiver: HttpsReceiver;
    let worker: ReturnType<typeof startWorker>;
    let monitor: WorkerMonitor;
    let failing = true;

    before(async () => {
      ctx = await createWebhookTestContext(backend, { WEBHOOK_RETRY_SCHEDULE: '20ms' });
      tenant = await createTenant(ctx, { tier: 'pro' });
      receiver = await HttpsReceiver.start({
        responder: () => ({ status: failing ? 500 : 204 }),
      });
      worker = startWorker(ctx.runtime, { pollIntervalMs: 50 });
      monitor = new WorkerMonitor(worker.worker);
    });
    after(async () => {
      await worker.stop();
      await receiver.close();
      await ctx.close();
    });

    const recover = (id: string, body: unknown, key?: string) =>
      ctx.api('POST', `/api/v1/webhooks/${id}/recover`, {
        token: tenant.token,
        body,
        headers: key ? { 'idempotency-key': key } : {},
      });
    const deliveries = async (id: string) =>
      (
        await ctx.api('GET', `/api/v1/webhooks/${id}/deliveries?limit=100`, { token: tenant.token })
      ).json().data as Array<Record<string, unknown>>;

    it('redelivers every dead letter of the window once, and nothing outside it', async () => {
      const created = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: receiver.url('/recover'), events: ['client.created'] },
      });
      const id = created.json().data.id;
      const since = new Date().toISOString();
      for (const name of ['One', 'Two', 'Three']) {
        await ctx.api('POST', '/api/v1/clients', {
          token: tenant.token,
          body: { kind: 'individual', displayName: name },
        });
      }
      await until3DeadLetters();
      async function until3DeadLetters() {
        for (let i = 0; i < 3; i++) await monitor.recorded(id, 'dead_letter');
        await eventually(
          async () => (await deliveries(id)).filter((d) => d.status === 'dead_letter').length === 3,
          'three dead letters',
        );
      }
      failing = false;

      // A window before them: nothing.
      const early = await recover(id, { since: '2020-01-01T00:00:00Z', until: since });
      assert.equal(early.statusCode, 202, early.body);
      assert.deepEqual(early.json(), { data: { queued: 0 } });

      const queued = await recover(id, { since }, 'recover-once');
      assert.equal(queued.statusCode, 202, queued.body);
      assert.deepEqual(queued.json(), { data: { queued: 3 } });
      // The same key replays the answer and queues nothing more.
      const replay = await recover(id, { since }, 'recover-once');
      assert.equal(replay.headers['idempotency-replayed'], 'true');

      await eventually(async () => {
        const redelivered = (await deliveries(id)).filter((d) => d.redeliveredFromId !== null);
        return redelivered.length === 3 && redelivered.every((d) => d.status === 'success');
      }, 'three redeliveries sent');
      const all = await deliveries(id);
      assert.equal(all.length, 6, 'three originals (untouched), three redeliveries');
      assert.equal(all.filter((d) => d.status === 'dead_letter').length, 3);

      // The subscription's last 24 hours, from the deliveries themselves.
      const listedSubscription = (await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token }))
        .json()
        .data.find((sub: { id: string }) => sub.id === id);
      assert.deepEqual(listedSubscription.last24h, { succeeded: 3, deadLettered: 3, pending: 0 });

      // The operator CLI sees and does the same.
      const listed = await tourops(['delivery', 'list', '--webhook', id, '--json'], ctx.env);
      assert.equal(listed.code, 0, listed.stderr);
      assert.equal(JSON.parse(listed.stdout).length, 6);
      const dead = await tourops(
        ['delivery', 'list', '--webhook', id, '--status', 'dead_letter', '--json'],
        ctx.env,
      );
      const deadRows = JSON.parse(dead.stdout);
      assert.equal(deadRows.length, 3);
      // The API's word works too, in every command that names a subscription; both at once do not.
      const bySubscription = await tourops(
        ['delivery', 'list', '--subscription', id, '--json'],
        ctx.env,
      );
      assert.equal(bySubscription.code, 0, bySubscription.stderr);
      assert.equal(bySubscription.stdout, listed.stdout);
      const both = await tourops(
        ['delivery', 'list', '--webhook', id, '--subscription', id],
        ctx.env,
      );
      assert.equal(both.code, 2);
      assert.match(both.stderr, /--webhook and --subscription are one option/);
      for (const command of ['recover', 'redeliver'] as const) {
        const help = await tourops(['delivery', command, '--help'], ctx.env);
        assert.match(help.stdout, /--webhook, --subscription <id>/, command);
      }
      const human = await tourops(['delivery', 'list', '--webhook', id, '--limit', '2'], ctx.env);
      assert.match(
        human.stdout,
        /^dlv_\w+ {2}success {2}client\.created {2}attempts 1 {2}last 204/m,
      );
      // The next page, as printed: the six, two by two, each once.
      const seen = [...human.stdout.matchAll(/^(dlv_\w+) /gm)].map((m) => m[1]);
      let more = /^More: tourops (.+)$/m.exec(human.stdout)?.[1];
      while (more) {
        const page = await tourops(more.split(' '), ctx.env);
        assert.equal(page.code, 0, page.stderr);
        seen.push(...[...page.stdout.matchAll(/^(dlv_\w+) /gm)].map((m) => m[1]));
        more = /^More: tourops (.+)$/m.exec(page.stdout)?.[1];
      }
      assert.deepEqual(
        seen,
        JSON.parse(listed.stdout).map((d: { id: string }) => d.id),
      );
      // The delivery names its subscription: --webhook may be left out.
      const again = await tourops(['delivery', 'redeliver', deadRows[0].id, '--json'], ctx.env);
      assert.equal(again.code, 0, again.stderr);
      assert.equal(JSON.parse(again.stdout).status, 'pending');
      const recovered = await tourops(
        ['delivery', 'recover', '--webhook', id, '--since', since, '--json'],
        ctx.env,
      );
      assert.equal(recovered.code, 0, recovered.stderr);
      assert.deepEqual(JSON.parse(recovered.stdout), { queued: 3 });
      const unknown = await tourops(
        ['delivery', 'list', '--webhook', 'whs_01JDZZZZZZZZZZZZZZZZZZZZZZ', '--json'],
        ctx.env,
      );
      assert.equal(unknown.code, 1);
      assert.equal(JSON.parse(unknown.stdout).error.type, 'not-found');
    });

    it('recovers what a pause missed: every event, in order, with the next sequences', async () => {
      failing = false;
      const subscribe = async (path: string) =>
        (
          await ctx.api('POST', '/api/v1/webhooks', {
            token: tenant.token,
            body: { url: receiver.url(path), events: ['client.created'] },
          })
        ).json().data.id as string;
      const client = (displayName: string) =>
        ctx.api('POST', '/api/v1/clients', {
          token: tenant.token,
          body: { kind: 'individual', displayName },
        });
      const patch = (id: string, body: unknown) =>
        ctx.api('PATCH', `/api/v1/webhooks/${id}`, { token: tenant.token, body });
      const id = await subscribe('/missed');
      const gone = await subscribe('/missed-deleted');
      await client('Before the pause');
      await monitor.recorded(id, 'success');
      await patch(id, { active: false });
      await patch(gone, { active: false });
      const since = new Date().toISOString();
      for (const name of ['Missed 1', 'Missed 2', 'Missed 3']) await client(name);
      assert.equal((await deliveries(id)).length, 1, 'no delivery while paused');
      assert.equal((await recover(id, { since, missed: true })).statusCode, 409, 'paused');

      await patch(id, { active: true });
      const recovered = await recover(id, { since, missed: true });
      assert.equal(recovered.statusCode, 202, recovered.body);
      assert.deepEqual(recovered.json(), { data: { queued: 3 } });
      await eventually(
        async () => (await deliveries(id)).filter((d) => d.status === 'success').length === 4,
        'four deliveries sent',
      );
      const bodies = receiver.requests
        .filter((r) => r.path === '/missed')
        .map((r) => JSON.parse(r.body) as { sequence: number; data: { displayName: string } })
        .sort((a, b) => a.sequence - b.sequence);
      assert.deepEqual(
        bodies.map((b) => [b.sequence, b.data.displayName]),
        [
          [1, 'Before the pause'],
          [2, 'Missed 1'],
          [3, 'Missed 2'],
          [4, 'Missed 3'],
        ],
      );
      assert.deepEqual((await recover(id, { since, missed: true })).json(), {
        data: { queued: 0 },
      });
      // The next event follows on, with no gap.
      await client('After');
      const after = await until(
        () =>
          receiver.requests.find(
            (r) => r.path === '/missed' && JSON.parse(r.body).data.displayName === 'After',
          ),
        'the next event',
      );
      assert.equal(JSON.parse(after.body).sequence, 5);

      // Deleted: nothing to recover, ever.
      await ctx.api('DELETE', `/api/v1/webhooks/${gone}`, { token: tenant.token });
      assert.equal((await recover(gone, { since, missed: true })).statusCode, 409);
      const sentToDeleted = await deliveryRows(ctx.runtime.database.db)
        .select('id')
        .where('subscriptionId', '=', gone)
        .where('createdAt', '>=', since)
        .execute();
      assert.equal(sentToDeleted.length, 0);
    });

    it('refuses a bad window and a window over the bound, queueing nothing', async () => {
      const created = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: receiver.url('/bounded'), events: ['client.created'] },
      });
      const id = created.json().data.id;
      const backwards = await recover(id, {
        since: '2026-11-02T00:00:00Z',
        until: '2026-11-01T00:00:00Z',
      });
      assert.equal(backwards.statusCode, 422);
      assert.ok(backwards.json().errors.until);
      assert.equal((await recover(id, { since: 'yesterday' })).statusCode, 422);

      // MAX_RECOVER + 1 dead letters, written directly (one event is enough).
      const { repositories } = ctx.runtime;
      const eventId = crypto.randomUUID();
      await repositories.events.insert({
        id: eventId,
        tenantId: tenant.id,
        type: 'client.created',
        data: '{"clientId":"cli_x","kind":"individual","displayName":"x"}',
        isTest: false,
        createdAt: '2026-11-01T00:00:00.000Z',
      });
      const rows = Array.from({ length: MAX_RECOVER + 1 }, () => ({
        id: newId('dlv'),
        tenantId: tenant.id,
        subscriptionId: id,
        eventId,
        eventType: 'client.created',
        status: 'dead_letter' as const,
        attempts: 2,
        lastResponseStatus: 500,
        nextAttemptAt: null,
        deliveredAt: null,
        claimedAt: null,
        redeliveredFromId: null,
        isTest: false,
        createdAt: '2026-11-01T12:00:00.000Z',
      }));
      for (let i = 0; i < rows.length; i += 500) {
        await repositories.webhooks.insertDeliveries(rows.slice(i, i + 500));
      }
      const tooMany = await recover(id, { since: '2026-11-01T00:00:00Z' });
      assert.equal(tooMany.statusCode, 422);
      assert.match(tooMany.json().detail + JSON.stringify(tooMany.json().errors), /10000/);
      const exactly = await recover(id, {
        since: '2026-11-01T00:00:00Z',
        until: '2026-11-01T12:00:00Z',
      });
      assert.deepEqual(exactly.json(), { data: { queued: 0 } }, 'until is excluded');
      const pending = await deliveryRows(ctx.runtime.database.db)
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('subscriptionId', '=', id)
        .where('status', '=', 'pending')
        .executeTakeFirstOrThrow();
      assert.equal(Number(pending.n), 0, 'nothing queued');
    });
  });
}
