import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ADMIN_TOKEN, BACKENDS, createTestDatabase, type TestDatabase } from './helpers/context.ts';
import { HttpsReceiver, testCa } from './helpers/https-receiver.ts';
import {
  adminTenantToken,
  type ChildService,
  callService,
  ROOT,
  runShell,
  startTourops,
} from './helpers/processes.ts';
import { eventually } from './helpers/until.ts';

// A rolled upgrade runs two releases at once on one database: `tourops migrate` of the new one
// first, then each process restarted in turn, so the previous release's code serves on the
// migrated schema until its last process is gone (and again if the upgrade is rolled back). The
// rule that makes it so is in docs/design.md ("Migrations and storage"); this holds it: the
// previous release's code, next to the current code, on a database the current code migrated.

const git = (...args: string[]) =>
  execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();

/**
 * The previous release: the newest commit before HEAD that set package.json's version (a release
 * commit, also tagged v<version>). HEAD itself is left out, so a release commit is tested against
 * the release before it.
 */
function previousRelease(): { commit: string; version: string } {
  let commit = '';
  try {
    commit = git('log', '-1', '--format=%H', '-G^  "version": ', 'HEAD^', '--', 'package.json');
  } catch {
    // no history (not a git checkout): said below
  }
  if (!commit) {
    throw new Error(
      'no release commit in the git history: this test needs the whole history (git fetch --unshallow)',
    );
  }
  const version = JSON.parse(git('show', `${commit}:package.json`)).version as string;
  return { commit, version };
}

/** A lock file's dependency tree, without the project's own version (which every release bumps). */
function dependencyTree(lockFile: string): string {
  const lock = JSON.parse(readFileSync(lockFile, 'utf8'));
  delete lock.version;
  delete lock.packages[''].version;
  return JSON.stringify(lock);
}

/**
 * The release's files in a temp directory, runnable: the current node_modules when its
 * dependencies are the current ones, else its own, installed from its lock file.
 */
function checkOut(commit: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'tourops-release-'));
  execFileSync('sh', ['-c', `git archive ${commit} | tar -x -C "${dir}"`], { cwd: ROOT });
  if (
    dependencyTree(join(dir, 'package-lock.json')) ===
    dependencyTree(join(ROOT, 'package-lock.json'))
  ) {
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  } else {
    execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: dir, stdio: 'ignore' });
  }
  return dir;
}

// The backends side by side: each test is mostly waiting for its processes.
describe('the previous release on a database the current code migrated', {
  concurrency: true,
}, () => {
  const release = previousRelease();
  let releaseDir: string;
  let receiver: HttpsReceiver;

  before(async () => {
    releaseDir = checkOut(release.commit);
    receiver = await HttpsReceiver.start();
  });
  after(async () => {
    await receiver?.close();
    if (releaseDir) rmSync(releaseDir, { recursive: true, force: true });
  });

  for (const backend of BACKENDS) {
    it(`serves reads, writes and deliveries beside the current code (${release.version}, ${backend})`, async () => {
      const database: TestDatabase = await createTestDatabase(backend);
      const ca = await testCa();
      const env = {
        ...database.env,
        ADMIN_API_TOKEN: ADMIN_TOKEN,
        WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
        WEBHOOK_CA_FILE: ca.caFile,
      };
      const servers: ChildService[] = [];
      try {
        // The upgrade's first step, by the current code.
        runShell('node bin/tourops.js migrate', env);
        const previous = await startTourops(['serve'], env, 'listening on', releaseDir);
        servers.push(previous);
        const current = await startTourops(['serve', '--no-worker'], env);
        servers.push(current);

        // The tenant by the previous release, its token by the current one.
        const { token } = await adminTenantToken(
          previous,
          ADMIN_TOKEN,
          { name: 'Upgrade', slug: `upgrade-${backend}`, tier: 'enterprise' },
          current,
        );

        // Each writes, each reads what the other wrote; the previous release's worker delivers.
        const subscription = await callService(previous, 'POST', '/api/v1/webhooks', token, {
          url: receiver.url(`/upgrade-${backend}`),
          events: ['client.created'],
        });
        assert.equal(subscription.status, 201, subscription.text);
        const subscriptionId = JSON.parse(subscription.text).data.id;
        const created: string[] = [];
        for (const [i, server] of [previous, current, previous, current].entries()) {
          const client = await callService(
            server,
            'POST',
            '/api/v1/clients',
            token,
            { kind: 'company', displayName: `Upgrade ${i}` },
            { 'idempotency-key': `upgrade-${i}` },
          );
          assert.equal(client.status, 201, client.text);
          created.push(JSON.parse(client.text).data.id);
        }
        for (const server of [previous, current]) {
          const list = await callService(server, 'GET', '/api/v1/clients', token);
          assert.equal(list.status, 200, list.text);
          assert.deepEqual(
            JSON.parse(list.text).data.map((c: { id: string }) => c.id),
            created,
          );
          for (const id of created) {
            assert.equal(
              (await callService(server, 'GET', `/api/v1/clients/${id}`, token)).status,
              200,
            );
          }
          const subscriptions = await callService(server, 'GET', '/api/v1/webhooks', token);
          assert.equal(subscriptions.status, 200, subscriptions.text);
          const replay = await callService(
            server,
            'POST',
            '/api/v1/clients',
            token,
            { kind: 'company', displayName: 'Upgrade 0' },
            { 'idempotency-key': 'upgrade-0' },
          );
          assert.equal(replay.status, 201, replay.text);
          assert.equal(replay.headers.get('idempotency-replayed'), 'true');
        }

        const delivered = () =>
          receiver.requests
            .filter((r) => r.path === `/upgrade-${backend}`)
            .map((r) => JSON.parse(r.body).data.clientId as string);
        await eventually(() => delivered().length >= created.length, 'deliveries');
        assert.deepEqual(delivered().sort(), [...created].sort());
        for (const server of [previous, current]) {
          const deliveries = await callService(
            server,
            'GET',
            `/api/v1/webhooks/${subscriptionId}/deliveries`,
            token,
          );
          assert.equal(deliveries.status, 200, deliveries.text);
          assert.equal(JSON.parse(deliveries.text).data.length, created.length);
        }
        for (const server of servers) {
          const errors = server
            .output()
            .split('\n')
            .filter((line) => /"level":(50|60)/.test(line));
          assert.deepEqual(errors, [], 'no error logged');
        }
      } finally {
        await Promise.all(servers.map((server) => server.stop()));
        await database.drop();
      }
    });
  }
});
