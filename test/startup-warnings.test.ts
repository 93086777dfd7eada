import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { freePort } from '../bench/processes.ts';
import { KNOWN_VARIABLES, misspeltVariables } from '../src/config.ts';
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

describe('the start-up log names each misconfiguration', () => {
  it('a misspelt variable, an unset admin token and a collector nobody listens on', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'tourops-warnings-'));
    const collectorPort = await freePort();
    const endpoint = `http://127.0.0.1:${collectorPort}`;
    const server = await startTourops(['serve'], {
      DATA_DIR: dataDir,
      DATABSE_URL: 'postgres://postgres@127.0.0.1:5432/test',
      ADMIN_TOKEN: 'an-admin-token-under-the-wrong-name-0123',
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      // The exporter's own bounds, short: it gives a batch up after its retries within this.
      OTEL_BSP_SCHEDULE_DELAY: '100',
      OTEL_EXPORTER_OTLP_TIMEOUT: '500',
    });
    try {
      const lines = () =>
        server
          .output()
          .split('\n')
          .filter((line) => line.startsWith('{'))
          .map((line) => JSON.parse(line) as Record<string, unknown>);
      const misspelt = lines().filter((line) => line.variable === 'DATABSE_URL');
      assert.equal(misspelt.length, 1, server.output());
      assert.equal(misspelt[0].level, 40);
      assert.equal(misspelt[0].nearest, 'DATABASE_URL');
      assert.match(String(misspelt[0].msg), /DATABSE_URL .*DATABASE_URL/);
      assert.match(server.output(), /\(SQLite in /);

      await eventually(() => /Admin API off/.test(server.output()), 5_000);
      const admin = server
        .output()
        .split('\n')
        .find((line) => line.startsWith('Admin API off'));
      assert.match(String(admin), /ADMIN_API_TOKEN=\$\(openssl rand -hex 32\)/);
      assert.match(String(admin), /ADMIN_TOKEN is set, but the name is ADMIN_API_TOKEN/);

      // Every request's span fails to leave, batch after batch: one line says so, not one a batch.
      const exportFailures = () => lines().filter((line) => line.endpoint === endpoint);
      for (let i = 0; i < 15; i += 1) {
        await fetch(`${server.baseUrl}/api/v1/me`);
        await new Promise((resolve) => setTimeout(resolve, 150));
      }
      await eventually(() => exportFailures().length > 0, 15_000, 'an export failure logged');
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const failures = exportFailures();
      assert.equal(failures.length, 1, JSON.stringify(failures));
      assert.equal(failures[0].level, 40);
      assert.match(String(failures[0].cause), /ECONNREFUSED/);
      assert.match(String(failures[0].msg), new RegExp(`span export to ${endpoint} failed`));
    } finally {
      await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
