import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { BACKENDS } from './helpers/context.ts';
import { deliveryRows } from './helpers/delivery-rows.ts';
import type { ReceivedRequest } from './helpers/https-receiver.ts';
import { type ChildService, startTourops } from './helpers/processes.ts';
import { until } from './helpers/until.ts';
import { setUp, WORKER_READY } from './helpers/worker-processes.ts';

// A crash loop as operators would meet it: a delivery whose attempt kills its worker, three
// `tourops worker` processes killed (kill -9) in turn, at a first, a middle and a last attempt.
// The fourth dead-letters each `worker_lost`, announced in a body its published schema allows,
// while another subscription's deliveries keep flowing.

/** WEBHOOK_WORKER_DEAD_AFTER for these workers: short, so a takeover is seconds away. */
const DEAD_AFTER_MS = 1_500;
/** Three attempts: the one that loops is the first, the second (middle) or the third (last). */
const LOOPS = { '/first': 1, '/middle': 2, '/last': 3 } as const;
const KILLS = 3;

type LoopPath = keyof typeof LOOPS;

describe('crash loops of `tourops worker` processes', { concurrency: 2 }, () => {
  for (const backend of BACKENDS) {
    it(`dead-letters a first, a middle and a last attempt killed three times, others flowing (${backend})`, async (t) => {
      const s = await setUp(backend, 60_000);
      t.after(() => s.close());
      const env = {
        ...s.env,
        WEBHOOK_RETRY_SCHEDULE: '1s,1s',
        WEBHOOK_WORKER_DEAD_AFTER: `${DEAD_AFTER_MS}ms`,
      };
      const loops = new Map<LoopPath, string>();
      for (const path of Object.keys(LOOPS) as LoopPath[]) loops.set(path, await s.subscribe(path));
      const flow = await s.subscribe('/flow');
      const announcements = await s.ctx.api('POST', '/api/v1/webhooks', {
        token: s.tenant.token,
        body: { url: s.receiver.url('/dead-letters'), events: ['webhook.delivery.dead_lettered'] },
      });
      assert.equal(announcements.statusCode, 201, announcements.body);
      // The looping event (its client's name says which) fails before its looping attempt and
      // never gets an answer to that one. Every other event is answered at once.
      const isLooping = (r: ReceivedRequest) => r.body.includes('"displayName":"Looping"');
      s.receiver.respond((r) => {
        const loopsAt = LOOPS[r.path as LoopPath];
        if (loopsAt === undefined || !isLooping(r)) return { status: 204 };
        return Number(r.headers['service-delivery-attempt']) < loopsAt ? { status: 500 } : 'hang';
      });
      const hung = (request: ReceivedRequest) =>
        request.path in LOOPS &&
        isLooping(request) &&
        Number(request.headers['service-delivery-attempt']) === LOOPS[request.path as LoopPath];
      const hungSends = () => s.receiver.requests.filter(hung).length;
      let looping: string | undefined;

      let worker: ChildService | null = null;
      t.after(() => worker?.stop('SIGKILL'));
      const flowed: string[] = [];
      /** A new event, delivered to /flow by the worker running now. */
      const flows = async (name: string) => {
        const before = s.receiver.requests.filter((r) => r.path === '/flow').length;
        await s.createClient(name);
        await until(
          () =>
            s.receiver.requests.filter((r) => r.path === '/flow').length > before
              ? true
              : undefined,
          `${name} delivered to /flow`,
        );
        flowed.push(name);
      };
      for (let kill = 1; kill <= KILLS; kill++) {
        worker = await startTourops(['worker'], env, WORKER_READY);
        if (kill === 1) {
          await s.createClient('Looping');
          looping = await until(
            () =>
              s.receiver.requests.find((r) => r.path === '/first')?.headers['service-event-id'] as
                | string
                | undefined,
            'the looping event sent',
          );
        }
        // Each worker takes over the rows its predecessor died holding, and dies holding them.
        await until(
          () => (hungSends() >= kill * 3 ? true : undefined),
          `attempts hung (kill ${kill})`,
        );
        await flows(`Flow ${kill}`);
        assert.equal(await worker.stop('SIGKILL'), null, 'killed, no exit code');
      }
      worker = await startTourops(['worker'], env, WORKER_READY);
      // At least once each: a delivery may be sent again, so three subscriptions, not requests.
      const bodies = await until((): Array<{ data: Record<string, unknown> }> | undefined => {
        const sent = s.receiver.requests.filter((r) => r.path === '/dead-letters');
        const parsed = sent.map((r) => JSON.parse(r.body));
        const about = new Set(parsed.map((body) => body.data.subscriptionId));
        return about.size >= 3 ? parsed : undefined;
      }, 'three dead letters announced');
      await flows('Flow after');
      assert.equal(hungSends(), KILLS * 3, 'a crash loop is not sent a fourth time');

      const catalog = await s.ctx.api('GET', '/api/v1/event-types', { token: s.tenant.token });
      const entry = (catalog.json().data as Array<{ type: string; schema: object }>).find(
        (e) => e.type === 'webhook.delivery.dead_lettered',
      );
      const validate = addFormats
        .default(new Ajv2020.default({ strict: false }))
        .compile(entry?.schema ?? {});
      const deliveries = await deliveryRows(s.ctx.runtime.database.db)
        .select(['id', 'subscriptionId', 'status', 'attempts', 'lastError', 'workerLosses'])
        .where('eventId', '=', looping ?? '')
        .execute();
      for (const [path, loopsAt] of Object.entries(LOOPS)) {
        const subscriptionId = loops.get(path as LoopPath);
        const row = deliveries.find((d) => d.subscriptionId === subscriptionId);
        assert.deepEqual(
          row && [row.status, row.lastError, row.attempts, row.workerLosses],
          ['dead_letter', 'worker_lost', loopsAt - 1, KILLS],
          `${path}: the attempts that finished, never the one cut off`,
        );
        const body = bodies.find((b) => b.data.subscriptionId === subscriptionId);
        assert.ok(body, `${path}: announced`);
        assert.ok(validate(body), `${path}: ${JSON.stringify(validate.errors)}`);
        assert.deepEqual(
          [body.data.deliveryId, body.data.eventId, body.data.attempts],
          [row?.id, looping, loopsAt - 1],
        );
      }
      const flowRow = deliveries.find((d) => d.subscriptionId === flow);
      assert.equal(flowRow?.status, 'success', 'the looping event reached /flow as well');
      assert.deepEqual(flowed, ['Flow 1', 'Flow 2', 'Flow 3', 'Flow after']);
      assert.equal(await worker.stop(), 0);
      worker = null;
    });
  }
});
