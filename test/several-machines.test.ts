import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from '../bench/processes.ts';
import { ADMIN_TOKEN, BACKENDS, createTestDatabase, type TestDatabase } from './helpers/context.ts';
import { DEPLOY_CONFIG, replaceOnce, type StatRow, startHaproxy } from './helpers/haproxy.ts';
import { HttpsReceiver, testCa } from './helpers/https-receiver.ts';
import { drive, type Load } from './helpers/load.ts';
import { type ChildService, ROOT, startTourops } from './helpers/processes.ts';
import { until } from './helpers/until.ts';
import { WORKER_READY } from './helpers/worker-processes.ts';

// The several-machines guide (docs/operations.md) as real processes: three `tourops serve
// --no-worker` API nodes and two `tourops worker`s on one PostgreSQL and one Redis, behind
// Debian's HAProxy running deploy/haproxy.cfg, and beside it the same balancer without any retry
// (as most cloud balancers and a Kubernetes Service treat a POST), where only SHUTDOWN_DRAIN can
// hide a restart.

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const API_NODES = 3;
const WORKERS = 2;
/** Above the health check's inter x (fall + 1) in deploy/haproxy.cfg (500 ms x 3). */
const DRAIN = '2s';

/** deploy/haproxy.cfg with this test's addresses; `retries: false` strips every retry. */
function balancerConfig(nodePorts: number[], retries: boolean): string {
  let config = replaceOnce(
    DEPLOY_CONFIG,
    'stats socket /run/haproxy/tourops.sock',
    'stats socket {{stats}}',
  );
  config = replaceOnce(config, 'bind :8080', 'bind {{bind}}');
  nodePorts.forEach((port, i) => {
    config = replaceOnce(
      config,
      // The example's address form (the .else of deploy/haproxy.cfg), not compose's names.
      new RegExp(`server api${i + 1} \\d+\\.\\d+\\.\\d+\\.\\d+:\\d+`),
      `server api${i + 1} 127.0.0.1:${port}`,
    );
  });
  if (!retries) {
    config = replaceOnce(config, '    retries 3\n', '    retries 0\n');
    config = replaceOnce(config, '    option redispatch 1\n', '');
    config = replaceOnce(
      config,
      '    retry-on conn-failure empty-response\n',
      '    retry-on none\n',
    );
  }
  return config;
}

/** deploy/haproxy.cfg's `timeout <name>`, in milliseconds. */
function configuredTimeoutMs(name: string): number {
  const found = new RegExp(`^\\s*timeout ${name} (\\d+)(ms|s|m)$`, 'm').exec(DEPLOY_CONFIG);
  if (found === null) throw new Error(`deploy/haproxy.cfg: no "timeout ${name}"`);
  return Number(found[1]) * { ms: 1, s: 1_000, m: 60_000 }[found[2] as 'ms' | 's' | 'm'];
}

/** docs/operations.md's `node_up`: whether the balancer has a node UP, by its stats socket. */
const DOCUMENTED_SOCKET = '/run/haproxy/tourops.sock';
const NODE_UP = (() => {
  const guide = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8');
  const found = /^node_up\(\) \{.*?^\}$/ms.exec(guide)?.[0];
  if (found === undefined || !found.includes(DOCUMENTED_SOCKET)) {
    throw new Error('docs/operations.md has no node_up() on the stats socket: this test runs it');
  }
  return found;
})();
const execFileAsync = promisify(execFile);

const backendRow = (rows: StatRow[]) =>
  rows.find((r) => r.pxname === 'tourops_api' && r.svname === 'BACKEND');

if (BACKENDS.includes('postgres')) {
  describe('several machines: 3 API nodes and 2 workers behind HAProxy, one PostgreSQL, one Redis', () => {
    let database: TestDatabase;
    let receiver: HttpsReceiver;
    let env: Record<string, string>;
    const nodePorts: number[] = [];
    const nodes: ChildService[] = [];
    const workers: ChildService[] = [];
    let balancers: Array<Awaited<ReturnType<typeof startHaproxy>>> = [];
    let sql: pg.Client;
    let token = '';
    let tenantId = '';
    /** Every load driven, to stop at the end and to count what was acked. */
    const loads: Load[] = [];

    /** Every API node started, restarted ones too: what they logged explains a failure. */
    const started: ChildService[] = [];
    const startNode = async (i: number) => {
      const node = await startTourops(['serve', '--no-worker'], {
        ...env,
        PORT: String(nodePorts[i]),
      });
      started.push(node);
      return node;
    };
    /** The warnings and errors the API nodes logged (they log at `warn`), one line each. */
    const nodeWarnings = () =>
      started
        .flatMap((node) => node.logRecords<{ level: number }>())
        .filter((record) => record.level >= 40)
        .map((record) => JSON.stringify(record))
        .join('\n');
    const startWorker = () => startTourops(['worker'], env, WORKER_READY);

    /** Until every balancer has `server` UP (its health checks passed `rise` times). */
    const untilUp = async (server: string) => {
      for (const balancer of balancers) {
        await until(async () => {
          const row = (await balancer.stats()).find(
            (r) => r.pxname === 'tourops_api' && r.svname === server,
          );
          return row?.status === 'UP' ? true : undefined;
        }, `${server} UP`);
      }
    };

    /** The guide's own wait (its `node_up`, on each balancer's socket), run by a shell. */
    const untilUpAsDocumented = async (server: string) => {
      for (const balancer of balancers) {
        const script = `${NODE_UP.replaceAll(DOCUMENTED_SOCKET, balancer.socket)}
until node_up ${server}; do sleep 0.5; done`;
        await execFileAsync('timeout', ['20', 'sh', '-ec', script]);
      }
    };

    before(async () => {
      database = await createTestDatabase('postgres');
      const ca = await testCa();
      receiver = await HttpsReceiver.start();
      env = {
        ...database.env,
        REDIS_URL,
        ADMIN_API_TOKEN: ADMIN_TOKEN,
        SHUTDOWN_DRAIN: DRAIN,
        TRUSTED_PROXIES: '127.0.0.1',
        WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
        WEBHOOK_CA_FILE: ca.caFile,
        WEBHOOK_RETRY_SCHEDULE: '1s,2s,5s,10s,30s',
        RATE_LIMIT_PER_MIN: '1000000',
        RATE_LIMIT_BURST_PER_SEC: '100000',
        // Every client of this test is 127.0.0.1, counted in a Redis other suites share.
        RATE_LIMIT_IP_PER_MIN: '100000000',
      };
      for (let i = 0; i < API_NODES; i++) nodePorts.push(await freePort());
      // The first applies the migrations; the others find them done.
      nodes.push(await startNode(0));
      const [others, started] = await Promise.all([
        Promise.all([1, 2].map(startNode)),
        Promise.all(Array.from({ length: WORKERS }, startWorker)),
      ]);
      nodes.push(...others);
      workers.push(...started);
      balancers = [
        await startHaproxy(balancerConfig(nodePorts, true)),
        await startHaproxy(balancerConfig(nodePorts, false)),
      ];
      for (let i = 1; i <= API_NODES; i++) await untilUp(`api${i}`);
      sql = new pg.Client({ connectionString: database.env.DATABASE_URL });
      await sql.connect();

      const admin = async (path: string, body: unknown) => {
        const response = await fetch(`http://127.0.0.1:${balancers[0].port}${path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        assert.equal(response.status, 201);
        return response.json();
      };
      tenantId = (
        await admin('/admin/v1/tenants', { name: 'Fleet', slug: 'fleet', tier: 'enterprise' })
      ).data.id;
      token = (
        await admin(`/admin/v1/tenants/${tenantId}/tokens`, { scopes: ['*'], name: 'fleet' })
      ).token;
      const subscribed = await fetch(`http://127.0.0.1:${balancers[0].port}/api/v1/webhooks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ url: receiver.url('/fleet'), events: ['client.created'] }),
      });
      assert.equal(subscribed.status, 201);
    });

    after(async () => {
      await Promise.all(loads.map((load) => load.stop()));
      await Promise.all([...nodes, ...workers].map((child) => child.stop('SIGKILL')));
      await Promise.all(balancers.map((balancer) => balancer.stop()));
      await sql?.end();
      await receiver?.close();
      await database?.drop();
    });

    /** The balancers' retry and redispatch counts, to report a phase's own. */
    const counted = async () =>
      Promise.all(
        balancers.map(async (balancer) => {
          const row = backendRow(await balancer.stats());
          return { wretr: Number(row?.wretr), wredis: Number(row?.wredis) };
        }),
      );
    let counts: Array<{ wretr: number; wredis: number }> = [];

    /** What clients and the balancer saw in this phase, as test diagnostics. */
    const report = async (t: TestContext, phase: string, driven: Array<[Load, number]>) => {
      const now = await counted();
      for (const [load, balancer] of driven) {
        const backend = {
          wretr: now[balancer].wretr - counts[balancer].wretr,
          wredis: now[balancer].wredis - counts[balancer].wredis,
        };
        t.diagnostic(
          `${phase}, ${load.label}: ${load.requests} requests, ${load.acked.size} creates acked, ` +
            `answers ${JSON.stringify(Object.fromEntries(load.statuses))}, ` +
            `balancer retries ${backend.wretr} redispatches ${backend.wredis}, failures ${load.failures.length}`,
        );
      }
    };

    it('tells clients to close an idle connection before the balancer closes it', async () => {
      // The balancer closes a client's idle connection after the shorter of these. A client that
      // keeps one as long as an answer's Keep-Alive says must have closed it by then, or its next
      // request can go out on a connection the balancer is closing: a socket error, with nothing
      // in the balancer's log (the rolled restart below, without retries, fails on it).
      const idleMs = Math.min(
        configuredTimeoutMs('http-keep-alive'),
        configuredTimeoutMs('client'),
      );
      for (const balancer of balancers) {
        const response = await fetch(`http://127.0.0.1:${balancer.port}/healthz`);
        await response.text();
        const hint = response.headers.get('keep-alive') ?? '';
        const seconds = /timeout=(\d+)/.exec(hint)?.[1];
        assert.ok(seconds !== undefined, `the answer says how long to keep it: "${hint}"`);
        assert.ok(
          Number(seconds) * 1_000 < idleMs,
          `Keep-Alive: ${hint}, closed after ${idleMs} ms`,
        );
      }
    });

    it('rolls a restart of every process in turn: no client request fails, with or without retries', async (t) => {
      counts = await counted();
      const retrying = drive('retrying', balancers[0].port, token, 3);
      const noRetries = drive('no-retry', balancers[1].port, token, 3);
      loads.push(retrying, noRetries);
      // Traffic through both balancers before, between and after the restarts: each step waits
      // for more creates acked on each (no fixed sleep, no count of a loaded machine's pace).
      const moreAcked = () => {
        const from = [retrying.acked.size, noRetries.acked.size];
        return until(
          () =>
            retrying.acked.size >= from[0] + 5 && noRetries.acked.size >= from[1] + 5
              ? true
              : undefined,
          'more creates acked through both balancers',
        );
      };
      await moreAcked();
      // The API nodes in turn, each waited for as docs/operations.md says, and beside them the
      // workers in turn.
      const rollNodes = async () => {
        for (let i = 0; i < API_NODES; i++) {
          assert.equal(await nodes[i].stop('SIGTERM'), 0, `api${i + 1} stopped cleanly`);
          nodes[i] = await startNode(i);
          await untilUpAsDocumented(`api${i + 1}`);
          await moreAcked();
        }
      };
      const rollWorkers = async () => {
        for (let i = 0; i < WORKERS; i++) {
          assert.equal(await workers[i].stop('SIGTERM'), 0, `worker ${i + 1} stopped cleanly`);
          workers[i] = await startWorker();
        }
      };
      await Promise.all([rollNodes(), rollWorkers()]);
      await moreAcked();
      await Promise.all([retrying.stop(), noRetries.stop()]);
      await report(t, 'rolled restart', [
        [retrying, 0],
        [noRetries, 1],
      ]);
      for (const load of [retrying, noRetries]) {
        assert.deepEqual(
          load.failures,
          [],
          `${load.label}: every request answered 2xx; the nodes logged:\n${nodeWarnings()}`,
        );
      }
      const noRetry = backendRow(await balancers[1].stats());
      assert.equal(noRetry?.wretr, '0', 'the balancer without retries retried nothing');
      assert.equal(noRetry?.wredis, '0');
      assert.equal(noRetry?.hrsp_5xx, '0', 'and answered no 5xx of its own');
    });

    it('loses no acked write when an API node is killed -9 (503 at most, retried with its key)', async (t) => {
      counts = await counted();
      const killed = drive('kill-9', balancers[0].port, token, 4, true);
      loads.push(killed);
      const moreAcked = (what: string) => {
        const from = killed.acked.size;
        return until(() => (killed.acked.size >= from + 5 ? true : undefined), what);
      };
      await moreAcked('creates acked before the kill');
      // Started again at once, as a supervisor would: until it listens, it refuses.
      await nodes[1].stop('SIGKILL');
      nodes[1] = await startNode(1);
      await untilUp('api2');
      await moreAcked('creates acked after the restart');
      await killed.stop();
      await report(t, 'kill -9 of api2', [[killed, 0]]);
      assert.deepEqual(killed.failures, []);
      for (const status of killed.statuses.keys()) {
        assert.ok(/^(2\d\d|503)$/.test(status), `no answer but 2xx and 503: ${status}`);
      }
    });

    it('delivers every acked create once it is all over, executes none twice, leaves nothing pending', async (t) => {
      // Every load ran its creates through the one subscription.
      const acked = new Map<string, string>();
      for (const load of loads) for (const [key, id] of load.acked) acked.set(key, id);
      const { rows: clients } = await sql.query(
        'select display_name, count(*)::int as n from clients where tenant_id = $1 group by display_name',
        [tenantId],
      );
      const twice = clients.filter((row) => row.n > 1);
      assert.deepEqual(twice, [], 'no keyed create executed twice');
      const wanted = new Set(
        (await sql.query('select id from clients where tenant_id = $1', [tenantId])).rows.map(
          (r) => r.id as string,
        ),
      );
      for (const id of acked.values()) assert.ok(wanted.has(id), `acked client ${id} is stored`);
      await until(async () => {
        const { rows } = await sql.query(
          "select count(*)::int as n from webhook_deliveries where status in ('pending', 'in_flight')",
        );
        return rows[0].n === 0 ? true : undefined;
      }, 'nothing left pending or in flight');
      const received = new Map<string, number>();
      for (const request of receiver.requests) {
        const id = JSON.parse(request.body).data.clientId as string;
        received.set(id, (received.get(id) ?? 0) + 1);
      }
      const missing = [...wanted].filter((id) => !received.has(id));
      assert.deepEqual(missing, [], 'every stored client was delivered');
      const { rows: statuses } = await sql.query(
        'select status, count(*)::int as n from webhook_deliveries group by status',
      );
      const duplicates = [...received.values()].filter((n) => n > 1).length;
      t.diagnostic(
        `${wanted.size} clients, deliveries ${JSON.stringify(statuses)}, ` +
          `${receiver.requests.length} requests at the receiver (${duplicates} events twice)`,
      );
      assert.deepEqual(
        statuses.map((row) => row.status),
        ['success'],
      );
    });

    it('answers problem+json 503 with Retry-After, not a balancer page, when no node is ready', async () => {
      const balancer = balancers[0];
      const servers = Array.from({ length: API_NODES }, (_, i) => `tourops_api/api${i + 1}`);
      for (const server of servers) await balancer.command(`disable server ${server}`);
      try {
        const response = await fetch(`http://127.0.0.1:${balancer.port}/api/v1/me`, {
          headers: { authorization: `Bearer ${token}` },
        });
        assert.equal(response.status, 503);
        assert.equal(response.headers.get('content-type'), 'application/problem+json');
        assert.equal(response.headers.get('retry-after'), '2');
        const problem = await response.json();
        // fetch sends the address it was given as Host.
        assert.equal(problem.type, `https://127.0.0.1:${balancer.port}/errors/service-unavailable`);
        assert.equal(problem.status, 503);
      } finally {
        for (const server of servers) await balancer.command(`enable server ${server}`);
      }
    });
  });
}
