import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { childPids } from '../bench/processes.ts';
import { ADMIN_TOKEN, BACKENDS, createTestDatabase, type TestDatabase } from './helpers/context.ts';
import {
  adminTenantToken,
  BIN,
  type ChildService,
  ROOT,
  startTourops,
} from './helpers/processes.ts';
import { parseExposition } from './helpers/prometheus.ts';
import { eventually, until } from './helpers/until.ts';

/** One request on a connection of its own (the cluster hands connections out in turn). */
function fresh(server: ChildService, path: string, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(`${server.baseUrl}${path}`, {
      agent: false,
      headers: { authorization: `Bearer ${token}` },
    });
    req.on('response', (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

/** The API processes the primary runs (its children other than esbuild's service). */
function apiProcesses(primary: number): number[] {
  return childPids(primary).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('tourops.js\0serve');
    } catch {
      return false;
    }
  });
}

const alive = (pid: number) => {
  try {
    readFileSync(`/proc/${pid}/stat`);
    return true;
  } catch {
    return false;
  }
};

for (const backend of BACKENDS) {
  describe(`tourops serve --processes 2 (${backend})`, () => {
    let database: TestDatabase;
    let server: ChildService;
    let token: string;

    before(async () => {
      database = await createTestDatabase(backend);
      server = await startTourops(['serve', '--processes', '2'], {
        ...database.env,
        ADMIN_API_TOKEN: ADMIN_TOKEN,
        LOG_LEVEL: 'info',
        RATE_LIMIT_PER_MIN: '20',
        RATE_LIMIT_BURST_PER_SEC: '1000',
      });
      ({ token } = await adminTenantToken(server, ADMIN_TOKEN, {
        name: 'Cluster',
        slug: `cluster-${backend}`,
        tier: 'pro',
      }));
    });
    after(async () => {
      await server.stop('SIGKILL');
      await database.drop();
    });

    it('serves from two processes that share one rate-limit count and one /metrics', async () => {
      const pids = apiProcesses(server.child.pid as number);
      assert.equal(pids.length, 2, `API processes: ${pids}`);
      const statuses: number[] = [];
      for (let i = 0; i < 30; i++) statuses.push(await fresh(server, '/api/v1/me', token));

      // Both processes answer (every request line names its process and its status), and each
      // refuses at least once: a process asks the shared count only when it holds no point it
      // took from it, and after a refusal it refuses the rest of the window alone, so no point
      // is then held unspent. The primary hands each connection to a process that is free, so
      // one held up under load may miss the first 30: more requests until both have refused.
      const answers = () =>
        server
          .logRecords<{ url?: string; pid: number; statusCode: number }>()
          .filter((record) => record.url === '/api/v1/me');
      const refusedBy = () =>
        new Set(answers().flatMap((a) => (a.statusCode === 429 ? [a.pid] : [])));
      while (refusedBy().size < 2 && statuses.length < 200) {
        statuses.push(await fresh(server, '/api/v1/me', token));
      }
      await eventually(() => answers().length === statuses.length, 'every answer logged');
      assert.deepEqual([...refusedBy()].sort(), [...pids].sort(), `${statuses}`);
      for (const pid of pids) {
        const own = answers()
          .filter((a) => a.pid === pid)
          .map((a) => a.statusCode);
        assert.ok(
          own.slice(own.indexOf(429)).every((s) => s === 429),
          `${pid}: ${own}`,
        );
      }

      // Whichever process answers /metrics counts every process's requests, and the decisions
      // a process made on its own count because the shared store did not answer in time.
      const families = parseExposition(await (await fetch(`${server.baseUrl}/metrics`)).text());
      const localOnly = families
        .find((f) => f.name === 'tourops_rate_limit_local_only')
        ?.samples.reduce((sum, s) => sum + (s.value ?? 0), 0);
      assert.equal(typeof localOnly, 'number', 'the local-only decisions are counted');
      // One shared count of 20. Above it only by what a process admitted on its own count, at
      // most two points a decision (a process takes at most an eighth of what it saw left).
      // Below it by at most a point a process: one taken two at a time when one was left, which
      // the store refuses and keeps.
      const admitted = statuses.filter((s) => s === 200).length;
      assert.ok(
        admitted >= 18 && admitted <= 20 + 2 * (localOnly as number),
        `${localOnly}: ${statuses}`,
      );
      const me = families
        .find((f) => f.name === 'tourops_http_request_duration_seconds')
        ?.samples.filter((s) => s.name.endsWith('_count') && s.labels.route === '/api/v1/me');
      assert.deepEqual(me?.map((s) => [s.labels.status_class, s.value]).sort(), [
        ['2xx', admitted],
        ['4xx', statuses.length - admitted],
      ]);
    });

    it('replaces a process that dies, and stops all of them on SIGTERM with exit code 0', async () => {
      const [victim, survivor] = apiProcesses(server.child.pid as number);
      process.kill(victim, 'SIGKILL');
      await until(() => {
        const now = apiProcesses(server.child.pid as number);
        return now.length === 2 && !now.includes(victim) ? now : undefined;
      }, 'a replacement process');
      assert.ok(alive(survivor));
      // The primary's line travels through a pipe: it may arrive after the replacement forked.
      const exited = new RegExp(`API process ${victim} exited \\(SIGKILL\\)`);
      await eventually(() => exited.test(server.output()), 'the exit reported');
      await eventually(
        () => /serving in its place/.test(server.output()),
        'the replacement listening',
      );
      for (let i = 0; i < 4; i++) {
        assert.equal(await fresh(server, '/healthz', ''), 200);
      }

      const children = apiProcesses(server.child.pid as number);
      assert.equal(await server.stop('SIGTERM'), 0);
      for (const pid of children) assert.ok(!alive(pid), `${pid} still runs`);
    });
  });
}

describe('tourops serve --processes values', () => {
  for (const value of ['0', '65', 'two', '1.5']) {
    it(`refuses --processes ${value} before starting anything`, () => {
      const run = spawnSync(process.execPath, [BIN, 'serve', '--processes', value], {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? '', DATA_DIR: '/nonexistent/never-created' },
        encoding: 'utf8',
      });
      assert.equal(run.status, 2, run.stderr);
      assert.match(run.stderr, /--processes/);
    });
  }
});
