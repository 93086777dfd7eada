import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { TRANSFORMATION_LIMITS } from '../domain/transformation.ts';
import { TransformationRunner } from './runner.ts';

// The runner and its thread, as the worker and the API use them: runs go to one thread, in turn
// by tenant, and a run that outlasts its cap inside one native call is stopped with its thread.

const PAYLOAD = { id: 'evt_1' };
const INPUT = {
  type: 'booking.created',
  url: 'https://receiver.test/hook',
  body: JSON.stringify(PAYLOAD),
};
const HTTPS = { https: true, withAuth: false, secretsOrigin: null };
const ECHO = 'function handler(webhook) { return webhook; }';
const ENDLESS = 'function handler(webhook) { for (;;) {} }';
/** One native call that runs for seconds, past QuickJS's interrupt: only the thread's end stops it. */
const NATIVE =
  "function handler(webhook) { 'a'.repeat(2e5).indexOf('a'.repeat(1e5) + 'b'); return webhook; }";

describe('the transformation runner', () => {
  const runner = new TransformationRunner();
  after(() => runner.close());

  it('serves tenants in turn; code that runs to its cap rests, its runs refused unrun', async () => {
    const order: string[] = [];
    const track = (key: string, code: string) =>
      runner.transform(key, code, INPUT, 0, HTTPS).then((outcome) => {
        order.push(key);
        return outcome;
      });
    // Warm: the thread started, the code compiled, and run once more (a first run in a new
    // thread is slow while WebAssembly compiles its functions, which marks its key slow).
    await track('good', ECHO);
    await track('good', ECHO);
    order.length = 0;
    const runs = [
      track('hostile', ENDLESS),
      track('hostile', ENDLESS),
      track('hostile', ENDLESS),
      track('good', ECHO),
      track('good', ECHO),
    ];
    const outcomes = await Promise.all(runs);
    // The first hostile run is sent at once; the two after it are refused as soon as it has run
    // to its cap, before the quick key's batch.
    assert.deepEqual(order, ['hostile', 'hostile', 'hostile', 'good', 'good']);
    const errors = outcomes.map((outcome) => (outcome.ok ? null : outcome.error));
    assert.match(errors[0] ?? '', /^ran longer than 100 ms/);
    for (const error of errors.slice(1, 3)) {
      assert.match(
        error ?? '',
        /^not run: this code's runs reach the time cap of 100 ms, and such code runs at most a quarter of the time \(again in \d+ ms\)$/,
      );
    }
    assert.deepEqual(errors.slice(3), [null, null]);
    // Refused at once while it rests, whatever the code (the key is the tenant).
    const resting = await runner.transform('hostile', ECHO, INPUT, 0, HTTPS);
    assert.match((resting as { error: string }).error, /^not run/);
  });

  it('stops a run caught in one native call with its thread, and serves the next on a new one', async () => {
    // (Its key then rests too.)
    const stopped = await runner.transform('native', NATIVE, INPUT, 0, HTTPS);
    assert.equal(stopped.ok, false);
    assert.match(
      (stopped as { error: string }).error,
      new RegExp(`ran longer than ${TRANSFORMATION_LIMITS.runMs} ms .*stopped after`),
    );
    const next = await runner.transform('good', ECHO, INPUT, 0, HTTPS);
    assert.deepEqual(next, {
      ok: true,
      result: { payload: PAYLOAD, url: INPUT.url, headers: {}, cancel: false },
    });
  });

  it('checks what a handler returns as a delivery takes it', async () => {
    const cases: Array<[string, RegExp]> = [
      ["webhook.headers['service-signature'] = 'forged';", /is a header of ours/],
      ["webhook.headers['webhook-id'] = 'x';", /Standard Webhooks header/],
      ["webhook.headers['content-type'] = 'text/plain';", /describes the body/],
      ["webhook.headers['x-ok'] = 'a\\nb';", /visible ASCII/],
      ["webhook.url = 'http://receiver.test/hook';", /must use https/],
      ["webhook.url = 'https://user:pw@receiver.test/hook';", /must not carry credentials/],
      ["webhook.type = 'booking.updated';", /cannot change/],
      ['webhook.cancel = 1;', /cancel must be a boolean/],
      ['webhook.extra = 1;', /unknown member "extra"/],
      ['return 42;', /must return the webhook object/],
      ['delete webhook.payload;', /returned no payload/],
    ];
    for (const [body, message] of cases) {
      const code = `function handler(webhook) { ${body} return webhook; }`;
      const outcome = await runner.transform('t', code, INPUT, 0, HTTPS);
      assert.equal(outcome.ok, false, body);
      assert.match((outcome as { error: string }).error, message, body);
    }
    const broker = await runner.transform(
      't',
      "function handler(webhook) { webhook.url = 'amqps://elsewhere/'; return webhook; }",
      { ...INPUT, url: 'amqps://user:***@broker.test/vhost?exchange=x&routingKey=y' },
      0,
      { https: false, withAuth: false, secretsOrigin: null },
    );
    assert.match((broker as { error: string }).error, /broker destination's url cannot be changed/);
    const auth = await runner.transform(
      't',
      "function handler(webhook) { webhook.headers.Authorization = 'Bearer x'; return webhook; }",
      INPUT,
      0,
      { https: true, withAuth: true, secretsOrigin: 'https://receiver.test' },
    );
    assert.match((auth as { error: string }).error, /what `auth` sends/);
    // The subscription's receiver authentication never goes to another origin.
    const moved = await runner.transform(
      't',
      "function handler(webhook) { webhook.url = 'https://elsewhere.test/hook'; return webhook; }",
      INPUT,
      0,
      { https: true, withAuth: false, secretsOrigin: 'https://receiver.test' },
    );
    assert.match((moved as { error: string }).error, /another origin .*its own origin only/);
    const samePlace = await runner.transform(
      't',
      "function handler(webhook) { webhook.url = 'https://receiver.test/other'; return webhook; }",
      INPUT,
      0,
      { https: true, withAuth: false, secretsOrigin: 'https://receiver.test' },
    );
    assert.equal(samePlace.ok && samePlace.result.url, 'https://receiver.test/other');
  });
});
