import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { freePort } from '../bench/processes.ts';
import { PgCluster, postgresBin } from './helpers/dependencies.ts';
import { type ChildService, startTourops } from './helpers/processes.ts';
import { until } from './helpers/until.ts';
import { setUp, WORKER_READY } from './helpers/worker-processes.ts';

// A separate `tourops worker` probed as an orchestrator probes it (contract.md, "Worker probes"),
// and serving processes and workers started before their database (DATABASE_START_WAIT).

const WAITING = 'waiting for the database';

/** Status, content type and JSON body of a GET, or null while nothing listens. */
async function probe(url: string) {
  try {
    const response = await fetch(url);
    const type = response.headers.get('content-type') ?? '';
    return { status: response.status, type, body: await response.json() };
  } catch {
    return null;
  }
}

/** Until `url` answers `status`: its answer. */
const probeUntil = (url: string, status: number) =>
  until(async () => {
    const answer = await probe(url);
    return answer?.status === status ? answer : undefined;
  }, `${url} ${status}`);

describe('a worker probed on WORKER_METRICS_PORT', () => {
  it('is alive and ready while it runs, draining from its stop until it exits', async (t) => {
    const s = await setUp('sqlite', 60_000);
    t.after(() => s.close());
    const subscriptionId = await s.subscribe('/slow');
    // The attempt under way at the stop answers once the test has seen the worker draining.
    let open: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    s.receiver.respond(() => ({ status: 204, after: gate }));
    const port = await freePort();
    const worker = await startTourops(
      ['worker'],
      { ...s.env, WORKER_METRICS_PORT: String(port) },
      WORKER_READY,
    );
    const base = `http://127.0.0.1:${port}`;
    try {
      assert.deepEqual(await probe(`${base}/healthz`), {
        status: 200,
        type: 'application/json; charset=utf-8',
        body: { status: 'ok' },
      });
      // Ready once it has joined the registry.
      assert.deepEqual((await probeUntil(`${base}/readyz`, 200)).body, { status: 'ok' });
      assert.equal((await fetch(`${base}/metrics`)).status, 200);
      assert.equal((await fetch(`${base}/other`)).status, 404);

      await s.createClient('Slow');
      await s.receiver.waitFor(1);
      const exited = worker.stop();
      const draining = await probeUntil(`${base}/readyz`, 503);
      assert.deepEqual(draining.body, { status: 'draining' });
      assert.equal((await probe(`${base}/healthz`))?.status, 200, 'alive while it drains');
      open();
      assert.equal(await exited, 0);
      assert.equal((await s.delivery(subscriptionId)).status, 'success', 'finished and recorded');
    } finally {
      open();
      await worker.stop();
    }
  });
});

describe('a process started before its database', {
  skip: postgresBin() === null ? 'no PostgreSQL server binaries' : false,
}, () => {
  const envOf = (pg: PgCluster) => ({
    DATABASE_URL: pg.url,
    SECRET_KEY: randomBytes(32).toString('hex'),
    ADMIN_API_TOKEN: randomBytes(24).toString('hex'),
    HOST: '127.0.0.1',
  });

  it('waits for it, alive and not ready, then serves: a server and a worker', async (t) => {
    const pg = await PgCluster.start();
    t.after(() => pg.destroy());
    pg.stopServer();
    const env = envOf(pg);
    const workerPort = await freePort();
    const children: ChildService[] = [];
    t.after(async () => {
      for (const child of children) await child.stop('SIGKILL');
    });
    const server = await startTourops(['serve', '--no-worker'], env, WAITING);
    children.push(server);
    const worker = await startTourops(
      ['worker'],
      { ...env, WORKER_METRICS_PORT: String(workerPort) },
      WAITING,
    );
    children.push(worker);
    const workerBase = `http://127.0.0.1:${workerPort}`;

    for (const base of [server.baseUrl, workerBase]) {
      assert.deepEqual((await probe(`${base}/healthz`))?.body, { status: 'ok' });
      assert.deepEqual(await probe(`${base}/readyz`), {
        status: 503,
        type: 'application/json; charset=utf-8',
        body: { status: 'starting' },
      });
    }
    // The API's own answer to a call while the database is away.
    const call = await probe(`${server.baseUrl}/api/v1/me`);
    assert.equal(call?.status, 503);
    assert.equal(call?.type, 'application/problem+json');
    assert.match(call?.body.type, /\/service-unavailable$/);

    pg.startServer();
    for (const base of [server.baseUrl, workerBase]) {
      assert.equal((await probeUntil(`${base}/readyz`, 200)).body.status, 'ok');
    }
    await until(() => worker.output().includes(WORKER_READY) || undefined, 'worker running');
    assert.match(server.output(), /listening on/);
    assert.equal((await probe(`${server.baseUrl}/api/v1/me`))?.status, 401);

    // The database goes away under the running worker: not ready, then ready again.
    pg.stopServer();
    const away = await probeUntil(`${workerBase}/readyz`, 503);
    assert.equal(away.type, 'application/problem+json');
    assert.match(away.body.type, /\/service-unavailable$/);
    pg.startServer();
    await probeUntil(`${workerBase}/readyz`, 200);

    assert.equal(await worker.stop(), 0);
    assert.equal(await server.stop(), 0);
  });

  it('exits 1 with one clear line once DATABASE_START_WAIT is spent', async (t) => {
    const pg = await PgCluster.start();
    t.after(() => pg.destroy());
    pg.stopServer();
    for (const wait of ['0s', '2s']) {
      const server = await startTourops(
        ['serve', '--no-worker'],
        { ...envOf(pg), DATABASE_START_WAIT: wait },
        'cannot reach the database',
      ).catch((error: Error) => error);
      if (!(server instanceof Error)) {
        // Both of its streams read to the end: the log line and the error line travel apart.
        const { child } = server;
        if (child.exitCode === null || child.stdout.readable) await once(child, 'close');
        assert.equal(child.exitCode, 1);
      }
      const output = server instanceof Error ? server.message : server.output();
      assert.match(output, /tourops: DATABASE_URL: cannot reach the database/);
      // It says it gave up waiting only when it was to wait (a loaded machine's first try may
      // outlast the 2 s: the wait itself is the test above's).
      assert.equal(/the database never answered; exiting/.test(output), wait !== '0s', output);
      if (wait === '0s') assert.doesNotMatch(output, /waiting for the database/);
    }
  });
});
