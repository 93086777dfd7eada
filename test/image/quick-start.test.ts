import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { freePort } from '../../bench/processes.ts';
import { verifyWebhook } from '../../sdk/src/index.ts';
import { HttpsReceiver, testCa } from '../helpers/https-receiver.ts';
import { until } from '../helpers/until.ts';
import { buildImage, IMAGE, podman, podmanQuietly, runOnLoopback, unique } from './podman.ts';

// The image as the README's quick start runs it: one container on the embedded database, its
// data in a volume, the root filesystem read-only, stopped by SIGTERM as an orchestrator stops it.
// The container shares the host's network so that its deliveries reach a receiver on this
// machine's loopback (nothing else is reachable here); the compose test publishes ports instead.

const ADMIN = `admin-${'x'.repeat(40)}`;

describe('the image (npm run test:image)', () => {
  let labels: { version: string; revision: string };
  let receiver: HttpsReceiver;
  let caFile: string;
  const volume = unique('data');
  const containers: string[] = [];

  before(async () => {
    labels = await buildImage();
    receiver = await HttpsReceiver.start();
    caFile = (await testCa()).caFile;
  });
  after(async () => {
    for (const name of containers) await podmanQuietly(['rm', '--force', '--time', '0', name]);
    await podmanQuietly(['volume', 'rm', '--force', volume]);
    await receiver?.close();
  });

  /** Starts the quick start's container on `port` (loopback), detached: its name. */
  const start = async (port: number, env: Record<string, string> = {}) => {
    const name = unique('api');
    containers.push(name);
    await runOnLoopback({
      name,
      port,
      volume,
      mounts: [`${caFile}:/run/test-ca.pem:ro`],
      env: {
        ADMIN_API_TOKEN: ADMIN,
        WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
        WEBHOOK_CA_FILE: '/run/test-ca.pem',
        SHUTDOWN_DRAIN: '2s',
        SHUTDOWN_TIMEOUT: '10s',
        ...env,
      },
    });
    const base = `http://127.0.0.1:${port}`;
    await until(async () => {
      const response = await fetch(`${base}/readyz`).catch(() => null);
      return response?.status === 200 ? true : undefined;
    }, `${name} ready`);
    return { name, base };
  };

  const call = async (base: string, method: string, path: string, token: string, body?: object) => {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body ? { 'content-type': 'application/json' } : {}),
      },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: response.status, body: await response.json() };
  };

  it('is labelled, non-root, with a health check, and holds no compiler, npm or dev dependency', async () => {
    const [image] = JSON.parse(await podman(['image', 'inspect', IMAGE]));
    const config = image.Config;
    assert.deepEqual(
      {
        version: config.Labels['org.opencontainers.image.version'],
        revision: config.Labels['org.opencontainers.image.revision'],
        licenses: config.Labels['org.opencontainers.image.licenses'],
      },
      { ...labels, licenses: 'Apache-2.0' },
    );
    assert.ok(config.Labels['org.opencontainers.image.source']);
    assert.equal(config.User, '10001:10001');
    assert.deepEqual(config.Entrypoint, ['tourops']);
    assert.deepEqual(config.Cmd, ['serve']);
    assert.ok(config.Volumes['/data'] !== undefined);
    assert.equal(image.Healthcheck?.Test?.[0] ?? config.Healthcheck?.Test?.[0], 'CMD');
    const found = await podman([
      'run',
      '--rm',
      '--read-only',
      '--network',
      'none',
      '--entrypoint',
      'sh',
      IMAGE,
      '-c',
      'for c in cc gcc g++ make python3 npm; do command -v $c; done; ls -d /root/.npm /app/node_modules/typescript /app/node_modules/@biomejs/biome /app/node_modules/playwright-core 2>/dev/null; id -u; true',
    ]);
    assert.equal(found, '10001', 'only the user id: no compiler, npm, npm cache or dev dependency');
    assert.equal(
      await podman(['run', '--rm', '--network', 'none', IMAGE, '--version']),
      `tourops ${labels.version}`,
    );
  });

  it('serves on the embedded database, delivers signed, drains on SIGTERM, exits 0, keeps its data', async () => {
    const port = await freePort();
    const first = await start(port);
    // Healthy by the image's own HEALTHCHECK.
    await podman(['healthcheck', 'run', first.name]);
    // The root filesystem is read-only; the volume is not.
    await assert.rejects(
      podman(['exec', first.name, 'touch', '/app/written']),
      /Read-only file system/,
    );

    const tenant = await call(first.base, 'POST', '/admin/v1/tenants', ADMIN, {
      name: 'Image Tours',
      slug: 'image',
      tier: 'pro',
    });
    assert.equal(tenant.status, 201, JSON.stringify(tenant.body));
    const minted = await call(
      first.base,
      'POST',
      `/admin/v1/tenants/${tenant.body.data.id}/tokens`,
      ADMIN,
      {
        name: 'image test',
        scopes: ['*'],
      },
    );
    assert.equal(minted.status, 201);
    const token = minted.body.token as string;
    const hook = await call(first.base, 'POST', '/api/v1/webhooks', token, {
      url: receiver.url('/hook'),
      events: ['client.created'],
    });
    assert.equal(hook.status, 201, JSON.stringify(hook.body));
    const client = await call(first.base, 'POST', '/api/v1/clients', token, {
      kind: 'individual',
      displayName: 'Ana Lima',
    });
    assert.equal(client.status, 201);
    const [delivery] = await receiver.waitFor(1);
    const event = verifyWebhook(delivery.body, delivery.headers, hook.body.signingKey);
    assert.equal(event.type, 'client.created');

    // SIGTERM, as `podman stop` and an orchestrator send it: not ready at once, still serving.
    await podman(['kill', '--signal', 'TERM', first.name]);
    const draining = await until(async () => {
      const response = await fetch(`${first.base}/readyz`).catch(() => null);
      return response?.status === 503 ? response.json() : undefined;
    }, 'draining');
    assert.deepEqual(draining, { status: 'draining' });
    // Exit code 0 is the process's own: it stopped within SHUTDOWN_TIMEOUT (else it exits 1).
    assert.equal(await podman(['wait', first.name]), '0');

    // The next container on the same volume has the tenant, its token and the client.
    const second = await start(port);
    const kept = await call(second.base, 'GET', `/api/v1/clients/${client.body.data.id}`, token);
    assert.equal(kept.status, 200);
    assert.equal(kept.body.data.displayName, 'Ana Lima');
    await podman(['stop', '--time', '15', second.name]);
    assert.equal(await podman(['inspect', '--format', '{{.State.ExitCode}}', second.name]), '0');
  });
});
