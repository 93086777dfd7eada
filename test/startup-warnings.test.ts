import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { freePort } from '../bench/processes.ts';
import { KNOWN_VARIABLES, misspeltVariables } from '../src/config.ts';
import { cliHere, tourops } from './helpers/cli.ts';
import { startTourops } from './helpers/processes.ts';
import { eventually } from './helpers/until.ts';

describe('variable names checked at start', () => {
  const flagged = (env: Record<string, string>) =>
    misspeltVariables(env).map(({ name, nearest }) => `${name}>${nearest}`);

  it('names a near miss of each known name with that name', () => {
    for (const name of KNOWN_VARIABLES) {
      // One letter dropped from the middle: distance 1, within either rule.
      const typo = name.slice(0, 2) + name.slice(3);
      if ((KNOWN_VARIABLES as readonly string[]).includes(typo)) continue;
      assert.deepEqual(flagged({ [typo]: 'x' }), [`${typo}>${name}`], name);
    }
    assert.deepEqual(flagged({ DATABSE_URL: 'x', database_url: 'y' }), [
      'DATABSE_URL>DATABASE_URL',
      'database_url>DATABASE_URL',
    ]);
    // Two edits from a long name; one from a short one.
    assert.deepEqual(flagged({ WEBHOK_TIMOUT_MS: '1' }), ['WEBHOK_TIMOUT_MS>WEBHOOK_TIMEOUT_MS']);
    assert.deepEqual(flagged({ PORTT: '1' }), ['PORTT>PORT']);
  });

  it('names anything under our prefixes, and leaves the rest of a shell alone', () => {
    assert.deepEqual(flagged({ WEBHOOK_TIMEOUT: '5s', PORTAL_LINK_TTL: '1m' }), [
      'WEBHOOK_TIMEOUT>WEBHOOK_TIMEOUT_MS',
      'PORTAL_LINK_TTL>PORT',
    ]);
    const shell = {
      HOME: '/root',
      PATH: '/bin',
      HOSTNAME: 'box',
      USER: 'root',
      SHELL: '/bin/sh',
      TERM: 'xterm',
      LANG: 'C',
      PWD: '/',
      NODE_ENV: 'test',
      TEST_DATABASE_URL: 'postgres://x',
      OTEL_RESOURCE_ATTRIBUTES: 'a=b',
      OTEL_BSP_SCHEDULE_DELAY: '100',
      PGPORT: '5432',
    };
    assert.deepEqual(
      flagged({ ...shell, ...Object.fromEntries(KNOWN_VARIABLES.map((n) => [n, ''])) }),
      [],
    );
  });
});

describe('names a platform injects are never flagged', () => {
  const flagged = (env: Record<string, string>) => misspeltVariables(env).map(({ name }) => name);

  it('Kubernetes service links, Nomad ports and HOSTS, even under our prefixes', () => {
    const injected = {
      WEBHOOK_SERVICE_HOST: '10.0.0.7',
      WEBHOOK_SERVICE_PORT: '443',
      WEBHOOK_SERVICE_PORT_HTTPS: '443',
      DATABASE_SERVICE_HOST: '10.0.0.8',
      DATABASE_PORT: 'tcp://10.0.0.8:5432',
      DATABASE_PORT_5432_TCP: 'tcp://10.0.0.8:5432',
      DATABASE_PORT_5432_TCP_PROTO: 'tcp',
      DATABASE_PORT_5432_TCP_PORT: '5432',
      DATABASE_PORT_5432_TCP_ADDR: '10.0.0.8',
      METRICS_PORT_9464_UDP: 'udp://10.0.0.9:9464',
      REDIS_PORT_6379_SCTP_ADDR: '10.0.0.9',
      PORTAL_PORT: 'tcp://10.0.0.10:80',
      PORT0: '20001',
      PORT12: '20012',
      HOSTS: 'a,b',
    };
    assert.deepEqual(flagged(injected), []);
    // The same shapes are still typos when they are not a link: a port number, a lower-case name.
    assert.deepEqual(flagged({ WORKER_METRIC_PORT: '9464', DATABASE_PORTS: '1', HOSTT: '1' }), [
      'WORKER_METRIC_PORT',
      'DATABASE_PORTS',
      'HOSTT',
    ]);
  });
});

describe('one-shot commands name a misspelt variable too', () => {
  it('tourops migrate, token create and --json runs: one warning line on stderr, stdout clean', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'tourops-warnings-'));
    try {
      const env = { DATA_DIR: dataDir, DATABSE_URL: 'x', KUBE_DNS_SERVICE_HOST: '10.0.0.1' };
      const warning =
        'tourops: warning: DATABSE_URL is not a variable this service reads: did you mean DATABASE_URL?\n';
      const migrated = await cliHere('migrate', env);
      assert.equal(migrated.code, 0, migrated.stderr);
      assert.equal(migrated.stderr, warning);
      const json = await cliHere('migrate --json', env);
      assert.equal(json.code, 0, json.stderr);
      assert.deepEqual(JSON.parse(json.stdout), { applied: [] });
      assert.equal(json.stderr, warning);
      const failed = await cliHere('token create --tenant nobody --scopes trips:read', env);
      assert.equal(failed.code, 1);
      assert.ok(failed.stderr.startsWith(warning), failed.stderr);
      // One tourops process, as operators run it.
      const child = await tourops('migrate', env);
      assert.equal(child.code, 0, child.stderr);
      assert.equal(child.stderr, warning);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('the start-up log names each misconfiguration', () => {
  it('a misspelt variable, an unset admin token, the guard lifted, a collector nobody hears', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'tourops-warnings-'));
    const collectorPort = await freePort();
    const endpoint = `http://127.0.0.1:${collectorPort}`;
    const server = await startTourops(['serve'], {
      DATA_DIR: dataDir,
      DATABSE_URL: 'postgres://postgres@127.0.0.1:5432/test',
      ADMIN_TOKEN: 'an-admin-token-under-the-wrong-name-0123',
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      // The exporter's own bounds, short: it gives a batch up after its retries within this.
      OTEL_BSP_SCHEDULE_DELAY: '100',
      OTEL_EXPORTER_OTLP_TIMEOUT: '500',
    });
    try {
      const lines = () => server.logRecords();
      const misspelt = lines().filter((line) => line.variable === 'DATABSE_URL');
      assert.equal(misspelt.length, 1, server.output());
      assert.equal(misspelt[0].level, 40);
      assert.equal(misspelt[0].nearest, 'DATABASE_URL');
      assert.match(String(misspelt[0].msg), /DATABSE_URL .*DATABASE_URL/);
      assert.match(server.output(), /\(SQLite in /);
      const lifted = lines().filter((line) => line.variable === 'WEBHOOK_ALLOW_PRIVATE_TARGETS');
      assert.equal(lifted.length, 1, server.output());
      assert.equal(lifted[0].level, 40);
      assert.match(String(lifted[0].msg), /SSRF guard is off/);

      await eventually(() => /Admin API off/.test(server.output()));
      const admin = server
        .output()
        .split('\n')
        .find((line) => line.startsWith('Admin API off'));
      assert.match(String(admin), /ADMIN_API_TOKEN=\$\(openssl rand -hex 32\)/);
      assert.match(String(admin), /ADMIN_TOKEN is set, but the name is ADMIN_API_TOKEN/);

      // Every request's span fails to leave, batch after batch: a line says so (one a minute, not
      // one a batch: src/lib/log-throttle.test.ts, with an injected clock). A request a poll
      // until it does.
      const exportFailures = () => lines().filter((line) => line.endpoint === endpoint);
      await eventually(async () => {
        await fetch(`${server.baseUrl}/api/v1/me`);
        return exportFailures().length > 0;
      }, 'an export failure logged');
      const failures = exportFailures();
      assert.equal(failures[0].failuresUnreported, 0, JSON.stringify(failures));
      assert.equal(failures[0].level, 40);
      assert.match(String(failures[0].cause), /ECONNREFUSED/);
      assert.match(String(failures[0].msg), new RegExp(`span export to ${endpoint} failed`));
    } finally {
      await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
