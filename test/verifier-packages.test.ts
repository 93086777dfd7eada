import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { generateKeyPairSync, sign } from 'node:crypto';
import { once } from 'node:events';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { freePort } from '../bench/processes.ts';
import {
  type VerificationCheck,
  verifyWebhook,
  WebhookVerificationError,
} from '../sdk/src/index.ts';
import { startWorker } from '../src/start-worker.ts';
import { reaped } from './helpers/children.ts';
import { ManualClock } from './helpers/clock.ts';
import { BACKENDS, createWebhookTestContext, type TestContext } from './helpers/context.ts';
import { createClient, createTenant, type TenantFixture } from './helpers/fixtures.ts';
import { HttpsReceiver, type ReceivedRequest } from './helpers/https-receiver.ts';
import { outputOf, ROOT, untilOutput } from './helpers/processes.ts';
import { until } from './helpers/until.ts';

// The verifier packages of sdk/python, sdk/go and sdk/php, each run by its own language's test
// runner against deliveries the worker made to a real HTTPS receiver: the default signature,
// Standard Webhooks v1, v1a (Ed25519), a key rotation and after its overlap. Each case says what
// the package must answer: the event, or the error of the one check that fails. Then each
// language's example receiver (docs/snippets) is handed a delivery as it arrived, and a forgery.

const run = promisify(execFile);
/** Debian's Python: its pip, wheel, setuptools and cryptography (installed by .ci/run). */
const PYTHON = '/usr/bin/python3';
const OVERLAP_MS = 24 * 3_600_000;
/** Non-ASCII, a slash and <&>: every language's JSON encoder writes some of it differently. */
const CLIENT_NAME = 'Zoë Ångström / Ålesund <&> 旅';

/** What a case must come to: its event, or the one check that refuses it (the same in every language). */
type Check = 'ok' | VerificationCheck;

interface Case {
  name: string;
  body: string;
  headers: Record<string, string>;
  keys: string[];
  now: number;
  tolerance: number;
  expect: Check;
  eventId: string;
  eventType: string;
}

/** A delivery as the receiver got it: every header as one string. */
interface Delivery {
  body: string;
  headers: Record<string, string>;
  t: number;
  eventId: string;
}

function delivery(request: ReceivedRequest): Delivery {
  const headers = Object.fromEntries(
    Object.entries(request.headers).map(([name, value]) => [name, String(value)]),
  );
  const event = JSON.parse(request.body) as { id: string; created: number };
  assert.match(headers['service-signature'], new RegExp(`^t=${event.created},`));
  return { body: request.body, headers, t: event.created, eventId: event.id };
}

const without = (headers: Record<string, string>, ...names: string[]) =>
  Object.fromEntries(Object.entries(headers).filter(([name]) => !names.includes(name)));

/** Only the Standard Webhooks headers: a receiver verifying v1 or v1a. */
const standardOnly = (d: Delivery) => ({ ...d, headers: without(d.headers, 'service-signature') });

const env = {
  PATH: process.env.PATH ?? '',
  HOME: process.env.HOME ?? tmpdir(),
  // Nothing is fetched: the packages use their standard libraries only.
  GOPROXY: 'off',
  GOFLAGS: '-mod=mod',
  PIP_NO_INDEX: '1',
};

/** A command's output, or a failure that shows it. */
async function runner(command: string, args: string[], options: { cwd: string; env?: object }) {
  try {
    const { stdout, stderr } = await run(command, args, {
      cwd: options.cwd,
      env: { ...env, ...options.env },
      maxBuffer: 16 << 20,
    });
    return `${stdout}${stderr}`;
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    assert.fail(`${command} ${args.join(' ')} failed:\n${stdout ?? ''}${stderr ?? ''}`);
  }
}

/** An example receiver, listening: `stop` ends it by its pid. */
async function startReceiver(
  command: string,
  args: (port: number) => string[],
  cwd: string,
  keys: object,
) {
  const port = await freePort();
  const child: ChildProcess = reaped(
    spawn(command, args(port), {
      cwd,
      env: { ...env, ...keys, PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  const output = outputOf(child);
  await untilOutput(child, output, command === 'php' ? 'started' : 'listening on');
  return {
    output,
    post: (d: Delivery) =>
      fetch(`http://127.0.0.1:${port}/webhooks`, {
        method: 'POST',
        headers: without(d.headers, 'host', 'content-length', 'connection'),
        body: d.body,
      }).then((response) => response.status),
    stop: async () => {
      child.kill('SIGTERM');
      if (child.exitCode === null && child.signalCode === null) await once(child, 'exit');
    },
  };
}

for (const backend of BACKENDS) {
  describe(`the verifier packages verify real deliveries (${backend})`, () => {
    const clock = new ManualClock();
    const work = mkdtempSync(join(tmpdir(), 'verifiers-'));
    let ctx: TestContext;
    let tenant: TenantFixture;
    let receiver: HttpsReceiver;
    let worker: ReturnType<typeof startWorker>;

    before(async () => {
      ctx = await createWebhookTestContext(backend, {}, { clock });
      tenant = await createTenant(ctx, { tier: 'pro' });
      receiver = await HttpsReceiver.start();
      worker = startWorker(ctx.runtime, { pollIntervalMs: 50 });
    });
    after(async () => {
      await worker.stop();
      await receiver.close();
      await ctx.close();
      rmSync(work, { recursive: true, force: true });
    });

    /** A subscription to client.created at `path`: its keys, current first. */
    const subscribe = async (path: string, body: object) => {
      const created = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: receiver.url(path), events: ['client.created'], ...body },
      });
      assert.equal(created.statusCode, 201, created.body);
      const { data, signingKey } = created.json() as {
        data: { id: string; publicKey: string | null };
        signingKey: string;
      };
      return { id: data.id, keys: [signingKey], publicKeys: [data.publicKey ?? ''] };
    };
    const rotate = async (subscription: Awaited<ReturnType<typeof subscribe>>) => {
      const rotated = await ctx.api('POST', `/api/v1/webhooks/${subscription.id}/rotate-key`, {
        token: tenant.token,
      });
      assert.equal(rotated.statusCode, 200, rotated.body);
      subscription.keys.unshift(rotated.json().signingKey);
      subscription.publicKeys.unshift(rotated.json().data.publicKey ?? '');
    };
    /** One client created; the delivery of its event at each path. */
    const deliveries = async (...paths: string[]) => {
      const { id } = await createClient(ctx, tenant, { displayName: CLIENT_NAME });
      const event = await until(async () =>
        (await ctx.runtime.repositories.events.listForTenant(tenant.id)).find(
          (e) => e.type === 'client.created' && JSON.parse(e.data).clientId === id,
        ),
      );
      return Promise.all(
        paths.map(async (path) =>
          delivery(
            await until(async () =>
              receiver.requests.find((r) => r.path === path && JSON.parse(r.body).id === event.id),
            ),
          ),
        ),
      );
    };

    const cases: Case[] = [];
    const add = (name: string, d: Delivery, keys: string[], expect: Check, more = {}) =>
      cases.push({
        name,
        body: d.body,
        headers: d.headers,
        keys,
        now: d.t,
        tolerance: 300,
        expect,
        eventId: d.eventId,
        eventType: 'client.created',
        ...more,
      });
    const casesFile = join(work, 'cases.json');
    /** What the example receivers are given: two deliveries as they arrived, and their keys. */
    let examples: { plain: Delivery; asymmetric: Delivery; signingKey: string; publicKey: string };
    const site = join(work, 'python-site');

    it('captures deliveries: each scheme, a rotation, and after its overlap', async () => {
      const plain = await subscribe('/plain', {});
      const standard = await subscribe('/standard', { standardWebhooks: true });
      const asymmetric = await subscribe('/asymmetric', {
        standardWebhooks: true,
        asymmetricSignatures: true,
      });
      const thin = await subscribe('/thin', {
        payload: 'thin',
        standardWebhooks: true,
        asymmetricSignatures: true,
      });
      const [p0, s0, a0, t0] = await deliveries('/plain', '/standard', '/asymmetric', '/thin');
      await Promise.all([plain, standard, asymmetric].map(rotate));
      const [p1, s1, a1] = await deliveries('/plain', '/standard', '/asymmetric');
      clock.set(new Date(clock.now().getTime() + OVERLAP_MS + 60_000));
      const [p2, s2, a2] = await deliveries('/plain', '/standard', '/asymmetric');
      const [[k1, k0], [sk1, sk0], [pk1, pk0]] = [plain.keys, standard.keys, asymmetric.publicKeys];
      const v1 = standardOnly;
      examples = { plain: p0, asymmetric: v1(a0), signingKey: k0, publicKey: pk0 };

      add('Service-Signature', p0, [k0], 'ok');
      add('Service-Signature beside the Standard Webhooks headers', s0, [sk0], 'ok');
      add('Standard Webhooks v1', v1(s0), [sk0], 'ok');
      add('v1 beside v1a', v1(a0), [asymmetric.keys[1]], 'ok');
      add('v1a with the public key alone', v1(a0), [pk0], 'ok');
      add('v1a and a signing key given together', a0, [pk0, asymmetric.keys[1]], 'ok');
      // A thin body (ids and `changed`) is verified as any other: the signature covers it as sent.
      assert.ok(JSON.parse(t0.body).data.changed, 'a thin body');
      add('a thin body, Service-Signature', t0, [thin.keys[0]], 'ok');
      add('a thin body, Standard Webhooks v1', v1(t0), [thin.keys[0]], 'ok');
      add('a thin body, v1a', v1(t0), [thin.publicKeys[0]], 'ok');
      for (const [scheme, d, keys] of [
        ['Service-Signature', p1, [k1, k0]],
        ['v1', v1(s1), [sk1, sk0]],
        ['v1a', v1(a1), [pk1, pk0]],
      ] as const) {
        add(`${scheme}, during a rotation, with the new key`, d, [keys[0]], 'ok');
        add(`${scheme}, during a rotation, with the old key`, d, [keys[1]], 'ok');
        add(`${scheme}, during a rotation, with both keys`, d, [...keys], 'ok');
      }
      for (const [scheme, d, keys] of [
        ['Service-Signature', p2, [k1, k0]],
        ['v1', v1(s2), [sk1, sk0]],
        ['v1a', v1(a2), [pk1, pk0]],
      ] as const) {
        add(`${scheme}, after the overlap, with the new key`, d, [keys[0]], 'ok');
        add(
          `${scheme}, after the overlap, with the retired key`,
          d,
          [keys[1]],
          'NoMatchingSignature',
        );
      }

      const otherPair = generateKeyPairSync('ed25519');
      const raw = Buffer.from(otherPair.publicKey.export({ format: 'jwk' }).x ?? '', 'base64url');
      const otherPublicKey = `whpk_${raw.toString('base64')}`;
      for (const [scheme, d, next, keys] of [
        ['Service-Signature', p0, p1, [k0]],
        ['v1', v1(s0), v1(s1), [sk0]],
        ['v1a', v1(a0), v1(a1), [pk0]],
      ] as const) {
        const byte = d.body.replace('"client.created"', '"client.createe"');
        add(
          `${scheme}: one byte of the body changed`,
          { ...d, body: byte },
          [...keys],
          'NoMatchingSignature',
        );
        add(
          `${scheme}: the body parsed and serialised again`,
          { ...d, body: JSON.stringify(JSON.parse(d.body), null, 2) },
          [...keys],
          'BodyNotRaw',
        );
        add(`${scheme}: now 301 s after the timestamp`, d, [...keys], 'TimestampOutsideTolerance', {
          now: d.t + 301,
        });
        add(
          `${scheme}: now 301 s before the timestamp`,
          d,
          [...keys],
          'TimestampOutsideTolerance',
          { now: d.t - 301 },
        );
        add(`${scheme}: 301 s with a tolerance of 600`, d, [...keys], 'ok', {
          now: d.t + 301,
          tolerance: 600,
        });
        add(
          `${scheme}: the signature of another event`,
          { ...d, body: next.body },
          [...keys],
          'NoMatchingSignature',
        );
        add(
          `${scheme}: no signature header`,
          { ...d, headers: without(d.headers, 'service-signature', 'webhook-signature') },
          [...keys],
          'MissingHeader',
        );
        add(`${scheme}: a key of another kind`, d, ['sk_test_0123456789'], 'InvalidKey');
      }
      add('v1a: verified with another public key', v1(a0), [otherPublicKey], 'NoMatchingSignature');
      const signed = Buffer.from(`${a0.headers['webhook-id']}.${a0.t}.${a0.body}`);
      const forged = `v1a,${sign(null, signed, otherPair.privateKey).toString('base64')}`;
      add(
        'v1a: signed by another key',
        { ...v1(a0), headers: { ...v1(a0).headers, 'webhook-signature': forged } },
        [pk0],
        'NoMatchingSignature',
      );
      add('v1a: asked of a delivery without v1a', v1(s0), [pk0], 'MalformedHeader');
      add(
        'v1: no webhook-id',
        { ...s0, headers: without(v1(s0).headers, 'webhook-id') },
        [sk0],
        'MissingHeader',
      );
      add(
        'Service-Signature: no v1',
        { ...p0, headers: { ...p0.headers, 'service-signature': `t=${p0.t}` } },
        [k0],
        'MalformedHeader',
      );
      writeFileSync(casesFile, JSON.stringify(cases));
      assert.ok(cases.filter((c) => c.expect === 'ok').length >= 15);
    });

    it("TypeScript: the SDK's verifyWebhook, each refusal named as in the others", () => {
      for (const c of cases) {
        const verify = () =>
          verifyWebhook(c.body, c.headers, c.keys, { now: c.now, toleranceSeconds: c.tolerance });
        if (c.expect === 'ok') {
          const event = verify();
          assert.deepEqual([event.id, event.type], [c.eventId, c.eventType], c.name);
        } else {
          assert.throws(
            verify,
            (error) => error instanceof WebhookVerificationError && error.check === c.expect,
            c.name,
          );
        }
      }
    });

    it('Python: python3 -m unittest, on the package pip installed without a network', async () => {
      const source = join(work, 'python-source');
      cpSync(join(ROOT, 'sdk/python'), source, { recursive: true });
      await runner(
        PYTHON,
        ['-m', 'pip', 'install', '--no-build-isolation', '--target', site, source],
        { cwd: work },
      );
      const output = await runner(PYTHON, ['-m', 'unittest', 'discover', '-v', '-s', 'tests'], {
        cwd: source,
        env: { PYTHONPATH: site, TOUROPS_WEBHOOK_CASES: casesFile },
      });
      assert.match(output, /test_every_case \(test_verify\.RealDeliveries.*\) \.\.\. ok/);
      assert.match(output, /\nOK\n/);
      assert.doesNotMatch(output, /skipped/);
    });

    it('Go: go test', async () => {
      const output = await runner('go', ['test', '-count=1', '-v', './...'], {
        cwd: join(ROOT, 'sdk/go'),
        env: { TOUROPS_WEBHOOK_CASES: casesFile },
      });
      const passed = output.match(/^ {4}--- PASS: TestRealDeliveries\//gm) ?? [];
      assert.equal(passed.length, cases.length, output);
      assert.match(output, /^ok\s+tourops\.example\/tourops/m);
    });

    it("PHP: PHPUnit (Debian's phpunit)", async () => {
      const output = await runner('phpunit', ['--testdox'], {
        cwd: join(ROOT, 'sdk/php'),
        env: { TOUROPS_WEBHOOK_CASES: casesFile },
      });
      const passed = output.match(/^ ✔ A real delivery with data set "/gm) ?? [];
      assert.equal(passed.length, cases.length, output);
      assert.match(output, /^OK \(\d+ tests, \d+ assertions\)$/m, output);
    });

    it('each example receiver verifies a delivery and refuses a forgery', async () => {
      const goBinary = join(work, 'receiver-go');
      await runner('go', ['build', '-o', goBinary, '.'], {
        cwd: join(ROOT, 'docs/snippets/receiver-go'),
      });
      const keys = {
        TOUROPS_SIGNING_KEYS: examples.signingKey,
        TOUROPS_PUBLIC_KEYS: examples.publicKey,
      };
      const snippets = join(ROOT, 'docs/snippets');
      const receivers = await Promise.all([
        startReceiver(PYTHON, () => ['receiver.py'], snippets, { ...keys, PYTHONPATH: site }),
        startReceiver(goBinary, () => [], snippets, keys),
        startReceiver('php', (port) => ['-S', `127.0.0.1:${port}`, 'receiver.php'], snippets, keys),
      ]);
      try {
        for (const example of receivers) {
          const { plain, asymmetric } = examples;
          assert.equal(await example.post(plain), 204, example.output());
          assert.equal(await example.post(asymmetric), 204, example.output());
          const forged = {
            ...plain,
            body: plain.body.replace('"client.created"', '"client.createe"'),
          };
          assert.equal(await example.post(forged), 400, example.output());
          await until(
            () =>
              (example.output().match(/^verified client\.created /gm)?.length === 2 &&
                /^refused: .*(NoMatchingSignature|no signature matches)/m.test(example.output())) ||
              undefined,
            example.output(),
          );
          assert.ok(example.output().includes(`verified client.created ${plain.eventId}`));
        }
      } finally {
        await Promise.all(receivers.map((example) => example.stop()));
      }
    });
  });
}
