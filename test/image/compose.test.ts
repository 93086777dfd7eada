import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../../bench/processes.ts';
import { testCa } from '../helpers/https-receiver.ts';
import { drive, type Load } from '../helpers/load.ts';
import { ROOT } from '../helpers/processes.ts';
import { until } from '../helpers/until.ts';
import { buildImage, compose, IMAGE, podman, podmanQuietly, standIns } from './podman.ts';

// compose.yaml's topology as an operator brings it up: `podman-compose up` from the repository's
// compose.yaml and deploy/haproxy.cfg, unchanged, with a test override that adds only a webhook
// receiver on the project's network and its CA (the official postgres, redis and haproxy images
// are replaced by stand-ins from Debian's packages: no image registry here). PostgreSQL is held
// back at first; then the several-machines test's rolled restart runs through its HAProxy.

/** How long PostgreSQL is held back while everything else starts (the figure). */
const HELD_BACK_MS = 30_000;
const ADMIN = randomBytes(24).toString('hex');

describe('compose.yaml (npm run test:image)', () => {
  const project = `tourops-test-${randomBytes(3).toString('hex')}`;
  const dir = mkdtempSync(join(tmpdir(), 'tourops-compose-'));
  const out = join(dir, 'out');
  let port = 0;
  let base = '';
  const container = (service: string) => `${project}_${service}_1`;
  const files = ['-p', project, '-f', 'compose.yaml', '-f', 'compose.override.yaml'];
  /** One SQL query in the postgres container, its rows as lines of `|`-separated columns. */
  const sql = async (query: string) =>
    (
      await podman([
        'exec',
        container('postgres'),
        'psql',
        '-p',
        '5432',
        '-U',
        'tourops',
        '-d',
        'tourops',
        '-Atc',
        query,
      ])
    )
      .split('\n')
      .filter(Boolean);

  before(async () => {
    await buildImage();
    const images = await standIns();
    port = await freePort();
    base = `http://127.0.0.1:${port}`;
    // The project as a user has it: compose.yaml and deploy/haproxy.cfg as they are, a .env.
    cpSync(join(ROOT, 'compose.yaml'), join(dir, 'compose.yaml'));
    mkdirSync(join(dir, 'deploy'));
    cpSync(join(ROOT, 'deploy/haproxy.cfg'), join(dir, 'deploy/haproxy.cfg'));
    const ca = await testCa();
    mkdirSync(join(dir, 'receiver'));
    writeFileSync(join(dir, 'receiver/key.pem'), ca.key);
    writeFileSync(join(dir, 'receiver/cert.pem'), ca.cert);
    cpSync(ca.caFile, join(dir, 'receiver/ca.pem'));
    mkdirSync(out);
    chmodSync(out, 0o777);
    const env = {
      TOUROPS_IMAGE: IMAGE,
      POSTGRES_IMAGE: images.postgres,
      REDIS_IMAGE: images.redis,
      HAPROXY_IMAGE: images.haproxy,
      TOUROPS_PORT: String(port),
      POSTGRES_PASSWORD: randomBytes(12).toString('hex'),
      SECRET_KEY: randomBytes(32).toString('hex'),
      ADMIN_API_TOKEN: ADMIN,
      PUBLIC_BASE_URL: base,
      LOG_LEVEL: 'warn',
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      WEBHOOK_CA_FILE: '/run/receiver/ca.pem',
      WEBHOOK_RETRY_SCHEDULE: '1s,2s,5s,10s,30s',
      RATE_LIMIT_PER_MIN: '1000000',
      RATE_LIMIT_BURST_PER_SEC: '100000',
      RATE_LIMIT_IP_PER_MIN: '100000000',
    };
    writeFileSync(
      join(dir, '.env'),
      Object.entries(env)
        .map(([k, v]) => `${k}=${v}\n`)
        .join(''),
    );
    // The override: the receiver, and its CA for the nodes (WEBHOOK_CA_FILE).
    writeFileSync(
      join(dir, 'compose.override.yaml'),
      `services:
  # Held back: compose starts every service at once; this one's server starts 30 s later.
  postgres:
    entrypoint: ["/bin/sh", "-c", "sleep ${HELD_BACK_MS / 1000}; exec /bin/sh /usr/local/bin/docker-entrypoint.sh"]
  api-1:
    volumes:
      - ./receiver:/run/receiver:ro
  api-2:
    volumes:
      - ./receiver:/run/receiver:ro
  worker:
    volumes:
      - ./receiver:/run/receiver:ro
  receiver:
    image: ${IMAGE}
    entrypoint: ["node", "/receiver/receiver.mjs"]
    volumes:
      - ./receiver:/run/receiver:ro
      - ${join(ROOT, 'test/image/stand-ins')}:/receiver:ro
      - ${out}:/out
`,
    );
  });
  after(async () => {
    for (const service of [
      'api-1',
      'api-2',
      'worker',
      'haproxy',
      'postgres',
      'redis',
      'receiver',
    ]) {
      // First, with its anonymous volumes (the image's /data), which `down` would leave.
      await podmanQuietly(['rm', '--force', '--volumes', '--time', '0', container(service)]);
    }
    // Then compose's own down, and what it leaves: the project's network and named volume.
    await compose([...files, 'down', '-v', '-t', '1'], dir).catch(() => undefined);
    await podmanQuietly(['volume', 'rm', '--force', `${project}_postgres`]);
    await podmanQuietly(['network', 'rm', '--force', `${project}_default`]);
    rmSync(dir, { recursive: true, force: true });
  });

  /** What the containers logged, for a failure's message. */
  const logs = async () => {
    const all = [
      await podman([
        'ps',
        '-a',
        '--filter',
        `name=${project}`,
        '--format',
        '{{.Names}} {{.Status}}',
      ]),
    ];
    for (const service of ['postgres', 'api-1', 'api-2', 'worker', 'haproxy']) {
      const text = await podman(['logs', '--tail', '30', container(service)]).catch((e) =>
        String(e),
      );
      all.push(`--- ${service}\n${text}`);
    }
    return all.join('\n');
  };
  /**
   * For a failed request under the restart: HAProxy's server states and how many requests it had
   * no node for, the nodes' warnings.
   */
  const restartLogs = async () => {
    const balancer = await podman(['logs', container('haproxy')]).catch((e) => String(e));
    const all = [`--- haproxy: ${balancer.split('<NOSRV>').length - 1} requests with no node`];
    for (const [service, keep] of [
      ['haproxy', /Server tourops_api|backend tourops_api/],
      ['api-1', /"level":[456]0/],
      ['api-2', /"level":[456]0/],
      ['worker', /"level":[456]0/],
    ] as const) {
      const text = await podman(['logs', container(service)]).catch((e) => String(e));
      const lines = text.split('\n').filter((line) => keep.test(line));
      all.push(`--- ${service}\n${lines.slice(-40).join('\n')}`);
    }
    return all.join('\n');
  };
  const readyThroughBalancer = async () => {
    try {
      await until(async () => {
        const response = await fetch(`${base}/readyz`).catch(() => null);
        return response?.status === 200 ? true : undefined;
      }, 'ready through HAProxy');
    } catch (error) {
      throw new Error(`${(error as Error).message}\n${await logs()}`);
    }
  };

  it('serves once PostgreSQL, held back, is up: nothing restarted by hand', async () => {
    const started = Date.now();
    await compose([...files, 'up', '-d', '--no-build'], dir);
    // Most of the hold (a floor: PostgreSQL's own start comes after it).
    await sleep(Math.max(0, HELD_BACK_MS - 5_000 - (Date.now() - started)));
    // Meanwhile the nodes live, waiting, and HAProxy answers the API's own 503 problem.
    const waiting = await fetch(`${base}/api/v1/me`);
    assert.equal(waiting.status, 503);
    assert.equal(waiting.headers.get('content-type'), 'application/problem+json');
    for (const service of ['api-1', 'api-2', 'worker']) {
      const [inspected] = JSON.parse(await podman(['inspect', container(service)]));
      assert.equal(inspected.State.Running, true, `${service} is running`);
      assert.equal(inspected.RestartCount, 0, `${service} was not restarted`);
    }
    await readyThroughBalancer();
    for (const service of ['api-1', 'api-2', 'worker']) {
      const logs = await podman(['logs', container(service)]);
      assert.match(logs, /waiting for the database/, `${service} said it waited`);
    }
  });

  it('rolls a restart of every tourops container through its HAProxy: nothing lost, nothing twice', async (t) => {
    const admin = async (path: string, body: unknown) => {
      const response = await fetch(`${base}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      assert.equal(response.status, 201, await response.clone().text());
      return response.json();
    };
    const tenant = (
      await admin('/admin/v1/tenants', { name: 'Compose', slug: 'compose', tier: 'enterprise' })
    ).data.id;
    const token = (
      await admin(`/admin/v1/tenants/${tenant}/tokens`, { scopes: ['*'], name: 'compose' })
    ).token as string;
    const subscribed = await fetch(`${base}/api/v1/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: 'https://receiver:8443/hook', events: ['client.created'] }),
    });
    assert.equal(subscribed.status, 201, await subscribed.text());

    const load: Load = drive('compose', port, token, 3);
    const moreAcked = () => {
      const from = load.acked.size;
      return until(() => (load.acked.size >= from + 5 ? true : undefined), 'more creates acked');
    };
    /** docs/operations.md's wait: the balancer has the node UP (its stats socket). */
    const untilUp = (server: string) =>
      until(async () => {
        const stat = await podman([
          'exec',
          container('haproxy'),
          'sh',
          '-c',
          'echo "show stat" | socat stdio /run/haproxy/tourops.sock',
        ]);
        const line = stat.split('\n').find((row) => row.startsWith(`tourops_api,${server},`));
        return line?.split(',')[17] === 'UP' ? true : undefined;
      }, `${server} UP`);
    try {
      // A roll starts with every node UP: the first stop, too, needs the other one serving (it
      // may still be starting: both waited for PostgreSQL).
      await untilUp('api1');
      await untilUp('api2');
      await moreAcked();
      for (const [service, server] of [
        ['api-1', 'api1'],
        ['api-2', 'api2'],
      ]) {
        await podman(['stop', '--time', '15', container(service)]);
        assert.equal(
          await podman(['inspect', '--format', '{{.State.ExitCode}}', container(service)]),
          '0',
        );
        await podman(['start', container(service)]);
        await untilUp(server);
        await moreAcked();
      }
      await podman(['stop', '--time', '15', container('worker')]);
      assert.equal(
        await podman(['inspect', '--format', '{{.State.ExitCode}}', container('worker')]),
        '0',
      );
      await podman(['start', container('worker')]);
      await moreAcked();
    } finally {
      await load.stop();
    }
    t.diagnostic(
      `${load.requests} requests, ${load.acked.size} creates acked, answers ${JSON.stringify(Object.fromEntries(load.statuses))}`,
    );
    if (load.failures.length > 0) t.diagnostic(await restartLogs());
    assert.deepEqual(load.failures, [], 'every request through HAProxy answered 2xx');
    for (const status of load.statuses.keys()) assert.match(status, /^2\d\d$/);

    // Nothing lost: every acked create stored once, and delivered.
    const stored = new Map(
      (await sql(`select id, display_name from clients where tenant_id = '${tenant}'`)).map(
        (row) => {
          const [id, name] = row.split('|');
          return [name, id] as const;
        },
      ),
    );
    const twice = await sql(
      `select display_name from clients where tenant_id = '${tenant}' group by display_name having count(*) > 1`,
    );
    assert.deepEqual(twice, [], 'no keyed create executed twice');
    for (const [key, id] of load.acked) assert.equal(stored.get(key), id, `acked ${key} is stored`);
    await until(
      async () =>
        (
          await sql(
            "select count(*) from webhook_deliveries where status in ('pending', 'in_flight')",
          )
        )[0] === '0'
          ? true
          : undefined,
      'nothing left pending or in flight',
    );
    assert.deepEqual(await sql('select distinct status from webhook_deliveries'), ['success']);
    const received = existsSync(join(out, 'received.jsonl'))
      ? readFileSync(join(out, 'received.jsonl'), 'utf8').split('\n').filter(Boolean)
      : [];
    const delivered = new Set(received.map((line) => JSON.parse(line).data.clientId as string));
    const missing = [...stored.values()].filter((id) => !delivered.has(id));
    assert.deepEqual(missing, [], 'every stored client was delivered to the receiver');
  });
});
