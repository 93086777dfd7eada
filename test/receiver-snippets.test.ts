import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import Stripe from 'stripe';
import { freePort } from '../bench/processes.ts';
import { newSigningKey } from '../src/domain/signing.ts';
import { startWorker } from '../src/start-worker.ts';
import { reaped } from './helpers/children.ts';
import { BACKENDS, createTestContext, type TestContext } from './helpers/context.ts';
import { createClient, createTenant, type TenantFixture } from './helpers/fixtures.ts';
import {
  HttpsReceiver,
  type ReceivedRequest,
  standardWebhookHeaders,
  testCa,
} from './helpers/https-receiver.ts';
import { outputOf, ROOT, startTourops, untilOutput } from './helpers/processes.ts';
import { until } from './helpers/until.ts';

// The receivers of docs/snippets (also on /docs), run as a reader would run them, against events
// that `tourops listen` forwards and deliveries the worker sends.

/**
 * A snippet receiver process on a free port: `node receiver.mjs`, or `python3 receiver.py` with
 * the verifier package from its source (test/verifier-packages.test.ts installs it with pip).
 */
async function startReceiver(command: string, file: string, signingKey: string, port?: number) {
  port ??= await freePort();
  const child: ChildProcess = reaped(
    spawn(command, [`docs/snippets/${file}`], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        PORT: String(port),
        TOUROPS_SIGNING_KEYS: signingKey,
        PYTHONPATH: `${ROOT}/sdk/python/src`,
        PYTHONDONTWRITEBYTECODE: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  const output = outputOf(child);
  await untilOutput(child, output, 'listening on');
  return {
    url: `http://localhost:${port}/webhooks`,
    output,
    stop: async () => {
      child.kill('SIGTERM');
      if (child.exitCode === null && child.signalCode === null) await once(child, 'exit');
    },
  };
}

for (const backend of BACKENDS) {
  describe(`tourops listen forwards real events to the snippet receivers (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    before(async () => {
      ctx = await createTestContext(backend);
      tenant = await createTenant(ctx);
    });
    after(() => ctx.close());

    const eventIdsOf = async (type: string) =>
      (await ctx.runtime.repositories.events.listForTenant(tenant.id))
        .filter((event) => event.type === type)
        .map((event) => event.id);

    it('Node: only the types asked for, signed with the given key, verified', async () => {
      const signingKey = newSigningKey();
      const receiver = await startReceiver(process.execPath, 'receiver.mjs', signingKey);
      const listen = await startTourops(
        [
          'listen',
          '--tenant',
          tenant.slug,
          '--events',
          'client.created',
          '--forward-to',
          receiver.url,
          '--signing-key',
          signingKey,
        ],
        ctx.env,
        'Signing key:',
      );
      try {
        await createClient(ctx, tenant);
        const [eventId] = await eventIdsOf('client.created');
        await until(
          () => receiver.output().includes(`verified client.created ${eventId}`) || undefined,
          receiver.output(),
        );
        // listen prints the answer once it has it, which may be after the receiver's line.
        const answered = new RegExp(`client\\.created  ${eventId}  → 204 \\(`);
        await until(() => answered.test(listen.output()) || undefined, listen.output());
        // A forged one is refused by the same receiver.
        const forged = await fetch(receiver.url, {
          method: 'POST',
          headers: {
            'service-signature': `t=${Math.floor(Date.now() / 1000)},v1=${'0'.repeat(64)}`,
          },
          body: '{"id":"x","type":"client.created"}',
        });
        assert.equal(forged.status, 400);
        assert.equal(await listen.stop('SIGINT'), 0);
        assert.match(listen.output(), /Stopped after forwarding 1 event\(s\)\./);
        assert.equal(receiver.output().match(/^verified /gm)?.length, 1, receiver.output());
      } finally {
        await listen.stop();
        await receiver.stop();
      }
    });

    it('names itself in User-Agent, not a server address it cannot know', async () => {
      const agents: string[] = [];
      const server = createServer((request, response) => {
        agents.push(String(request.headers['user-agent']));
        response.writeHead(204).end();
      });
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      const { port } = server.address() as AddressInfo;
      const listen = await startTourops(
        ['listen', '--tenant', tenant.id, '--forward-to', `http://127.0.0.1:${port}/hook`],
        { ...ctx.env, PORT: '3999' },
        'Signing key:',
      );
      try {
        await createClient(ctx, tenant);
        await until(() => agents.length > 0 || undefined, listen.output());
        assert.deepEqual(agents, ['Service-Webhooks/1.0 (tourops listen)']);
      } finally {
        await listen.stop();
        server.close();
      }
    });

    it('Python: every type, signed with the key listen printed', async () => {
      // listen first (it prints a new key each run), then the receiver with that key.
      const port = await freePort();
      const listen = await startTourops(
        ['listen', '--tenant', tenant.id, '--forward-to', `http://localhost:${port}/webhooks`],
        ctx.env,
        'Signing key:',
      );
      const key = /Signing key: (whsec_\S+)/.exec(listen.output())?.[1];
      assert.ok(key, listen.output());
      const receiver = await startReceiver('python3', 'receiver.py', key, port);
      try {
        const before = new Set(await eventIdsOf('client.created'));
        await createClient(ctx, tenant);
        const eventId = (await eventIdsOf('client.created')).find((id) => !before.has(id));
        await until(
          () => receiver.output().includes(`verified client.created ${eventId}`) || undefined,
          receiver.output(),
        );
        assert.equal(await listen.stop('SIGINT'), 0);
        assert.match(listen.output(), /Stopped after forwarding 1 event\(s\)\./);
      } finally {
        await listen.stop();
        await receiver.stop();
      }
    });

    it('refuses a URL off this machine, an unknown event type and an unknown tenant', async () => {
      const run = (args: string[]) =>
        spawnSync(process.execPath, ['bin/tourops.js', 'listen', ...args], {
          cwd: ROOT,
          env: { PATH: process.env.PATH ?? '', ...ctx.env },
          encoding: 'utf8',
        });
      const offMachine = run(['--tenant', tenant.slug, '--forward-to', 'http://192.0.2.1/hook']);
      assert.equal(offMachine.status, 2);
      assert.match(offMachine.stderr, /--forward-to must be an http\(s\) URL on this machine/);
      const unknownType = run([
        '--tenant',
        tenant.slug,
        '--events',
        'client.created,trip.exploded',
        '--forward-to',
        'http://localhost:4242/webhooks',
      ]);
      assert.equal(unknownType.status, 2);
      assert.match(unknownType.stderr, /--events: unknown trip\.exploded/);
      const unknownTenant = run(['--tenant', 'nobody', '--forward-to', 'http://[::1]:4242/']);
      assert.equal(unknownTenant.status, 1);
      assert.match(unknownTenant.stderr, /Tenant "nobody" was not found in /);
    });
  });
}

describe('the receiver snippets verify a real delivery of the worker', () => {
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

  it('Node, with the SDK; and Stripe’s library accepts it too', async () => {
    process.env.TOUROPS_SIGNING_KEYS = signingKey;
    const { handleDelivery } = await import('../docs/snippets/receiver-sdk.ts');
    const body = Buffer.from(delivery.body);
    const handled = handleDelivery(body, delivery.headers);
    assert.equal(handled.status, 204);
    assert.match(handled.message, /^booking bkg_\w+ confirmed$/);
    const tampered = Buffer.from(delivery.body.replace('EUR', 'USD'));
    assert.equal(handleDelivery(tampered, delivery.headers).status, 400);
    const stripe = new Stripe('sk_unused');
    const event = stripe.webhooks.constructEvent(body, signature(), signingKey, 300);
    assert.equal(event.type, 'booking.confirmed');
    assert.throws(() => stripe.webhooks.constructEvent(tampered, signature(), signingKey, 300));
  });

  it('Node verifies v1a (Ed25519) with the public key alone', async () => {
    const created = await ctx.api('POST', '/api/v1/webhooks', {
      token: tenant.token,
      body: {
        url: receiver.url('/snippets-v1a'),
        events: ['booking.confirmed'],
        standardWebhooks: true,
        asymmetricSignatures: true,
      },
    });
    const { id, publicKey } = created.json().data as { id: string; publicKey: string };
    await ctx.api('POST', '/api/v1/webhooks/test', {
      token: tenant.token,
      body: { subscriptionId: id, eventType: 'booking.confirmed' },
    });
    const signed = await until(async () =>
      receiver.requests.find((r) => r.path === '/snippets-v1a'),
    );
    const headers = standardWebhookHeaders(signed);
    // The snippet is plain JavaScript, as a reader copies it: typed here at the call.
    const snippet = new URL('../docs/snippets/receiver.mjs', import.meta.url).href;
    const { verifyV1a } = (await import(snippet)) as {
      verifyV1a: (
        body: Buffer,
        headers: Record<string, string>,
        keys: string[],
      ) => { type: string };
    };
    assert.equal(
      verifyV1a(Buffer.from(signed.body), headers, [publicKey]).type,
      'booking.confirmed',
    );
    const tampered = Buffer.from(signed.body.replace('EUR', 'USD'));
    assert.throws(() => verifyV1a(tampered, headers, [publicKey]), /no v1a signature/);
  });

  it('Node, standard library only: verifies, and refuses a changed body', async () => {
    const node = await startReceiver(process.execPath, 'receiver.mjs', signingKey);
    try {
      const post = (raw: string) =>
        fetch(node.url, {
          method: 'POST',
          headers: { 'service-signature': signature() },
          body: raw,
        }).then((response) => response.status);
      assert.equal(await post(delivery.body), 204);
      assert.equal(await post(delivery.body.replace('EUR', 'USD')), 400);
      await until(
        () =>
          /verified booking\.confirmed [0-9a-f-]{36}\nrefused: no signature/.test(node.output()) ||
          undefined,
        node.output(),
      );
    } finally {
      await node.stop();
    }
  });
});
