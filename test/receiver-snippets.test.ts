import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { startWorker } from '../src/webhooks/start-worker.ts';
import { createTestContext, type TestContext } from './helpers/context.ts';
import { createTenant, type TenantFixture } from './helpers/fixtures.ts';
import { HttpsReceiver, type ReceivedRequest, testCa } from './helpers/https-receiver.ts';
import { until } from './helpers/until.ts';

// The receiver snippets of the README and docs/snippets, run against a real signed delivery.

describe('the receiver snippets verify a real delivery', () => {
  let ctx: TestContext;
  let tenant: TenantFixture;
  let receiver: HttpsReceiver;
  let worker: ReturnType<typeof startWorker>;
  let delivery: ReceivedRequest;
  let signingKey: string;

  before(async () => {
    const ca = await testCa();
    ctx = await createTestContext('sqlite', {
      env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', WEBHOOK_CA_FILE: ca.caFile },
    });
    tenant = await createTenant(ctx, { tier: 'pro' });
    receiver = await HttpsReceiver.start();
    worker = startWorker(ctx.runtime, { pollIntervalMs: 50 });
    const created = await ctx.api('POST', '/api/v1/webhooks', {
      token: tenant.token,
      body: { url: receiver.url('/snippets'), events: ['booking.confirmed'] },
    });
    signingKey = created.json().signingKey;
    await ctx.api('POST', '/api/v1/webhooks/test', {
      token: tenant.token,
      body: { eventType: 'booking.confirmed' },
    });
    delivery = await until(async () => receiver.requests.find((r) => r.path === '/snippets'));
  });
  after(async () => {
    await worker.stop();
    await receiver.close();
    await ctx.close();
  });

  const signature = () => String(delivery.headers['service-signature']);

  it('Node, with the SDK and with Stripe', async () => {
    process.env.TOUROPS_SIGNING_KEYS = signingKey;
    const { handleWithSdk, handleWithStripe, server } = await import(
      '../docs/snippets/receiver.ts'
    );
    const body = Buffer.from(delivery.body);
    assert.match(handleWithSdk(body, delivery.headers), /^booking bkg_\w+ confirmed$/);
    assert.match(handleWithStripe(body, signature()), /^booking\.confirmed [0-9a-f-]{36}$/);
    assert.throws(() =>
      handleWithSdk(Buffer.from(delivery.body.replace('EUR', 'USD')), delivery.headers),
    );
    assert.throws(() => handleWithStripe(Buffer.from(`${delivery.body} `), signature()));
    server.close();
  });

  it('Python, standard library only', () => {
    const run = (body: string, keys: string[]) =>
      spawnSync('python3', ['docs/snippets/verify_webhook.py', signature(), ...keys], {
        input: body,
        encoding: 'utf8',
      });
    const accepted = run(delivery.body, [signingKey]);
    assert.equal(accepted.status, 0, accepted.stderr);
    assert.match(accepted.stdout, /^booking\.confirmed [0-9a-f-]{36}\n$/);
    // Either key during a rotation.
    assert.equal(
      run(delivery.body, ['whsec_old-key-0000000000000000000000000', signingKey]).status,
      0,
    );
    const tampered = run(delivery.body.replace('EUR', 'USD'), [signingKey]);
    assert.equal(tampered.status, 1);
    assert.match(tampered.stderr, /no signature matches/);
    assert.equal(run(delivery.body, ['whsec_wrong-key-000000000000000000000000']).status, 1);
  });
});
