import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createDatabase } from '../src/db/database.ts';
import { attemptLog, mostWithin } from './helpers/attempt-log.ts';
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
import { eventually, until } from './helpers/until.ts';

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

/** What both releases run with: the database, the admin token, the receiver's CA. */
async function serviceEnv(database: TestDatabase): Promise<Record<string, string>> {
  return {
    ...database.env,
    ADMIN_API_TOKEN: ADMIN_TOKEN,
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    WEBHOOK_CA_FILE: (await testCa()).caFile,
  };
}

/** No process logged at error or fatal. */
function assertNoErrorLogged(servers: readonly ChildService[]): void {
  for (const server of servers) {
    const errors = server
      .output()
      .split('\n')
      .filter((line) => /"level":(50|60)/.test(line));
    assert.deepEqual(errors, [], 'no error logged');
  }
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
      const env = await serviceEnv(database);
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
        assertNoErrorLogged(servers);
      } finally {
        await Promise.all(servers.map((server) => server.stop()));
        await database.drop();
      }
    });

    // The queue's own migration (0032): what the previous release left queued is sent by the
    // current code exactly as it would have been, and what it queues after the migration too.
    it(`moves a live queue while the previous release serves (${release.version}, ${backend})`, async () => {
      const database: TestDatabase = await createTestDatabase(backend);
      const env = await serviceEnv(database);
      const servers: ChildService[] = [];
      const db = createDatabase({
        databaseUrl: database.env.DATABASE_URL ?? null,
        dataDir: database.env.DATA_DIR,
      });
      try {
        // The previous release alone, its API only: what it queues stays queued.
        const previous = await startTourops(
          ['serve', '--no-worker'],
          env,
          'listening on',
          releaseDir,
        );
        servers.push(previous);
        const { token } = await adminTenantToken(previous, ADMIN_TOKEN, {
          name: 'Queue',
          slug: `queue-${backend}`,
          tier: 'enterprise',
        });
        const call = (method: string, path: string, body?: unknown, headers = {}) =>
          callService(previous, method, path, token, body, headers);
        const subscription = async (name: string, extra: Record<string, unknown> = {}) => {
          const created = await call('POST', '/api/v1/webhooks', {
            url: receiver.url(`/queue-${backend}/${name}`),
            events: ['client.created'],
            ...extra,
          });
          assert.equal(created.status, 201, created.text);
          return JSON.parse(created.text).data.id as string;
        };
        const ids = {
          plain: await subscription('plain'),
          held: await subscription('held'),
          paced: await subscription('paced', { maxPerSecond: 1 }),
          ordered: await subscription('ordered', { ordering: 'per_object' }),
          dead: await subscription('dead'),
        };
        const writeClients = async (from: number, count: number) => {
          for (let i = from; i < from + count; i++) {
            const created = await call(
              'POST',
              '/api/v1/clients',
              { kind: 'company', displayName: `Queue ${i}` },
              { 'idempotency-key': `queue-${i}` },
            );
            assert.equal(created.status, 201, created.text);
          }
        };
        await writeClients(0, 3);

        // Its queue as a running deployment leaves it: an endpoint held by its Retry-After, a
        // subscription's deliveries dead-lettered, one attempt in flight with a worker killed.
        const now = Date.now();
        const heldUntil = new Date(now + 3_000).toISOString();
        const long = new Date(now - 3_600_000).toISOString();
        await db.db
          .updateTable('webhookSubscriptions')
          .set({ heldUntil })
          .where('id', '=', ids.held)
          .execute();
        await db.db
          .updateTable('webhookDeliveries')
          .set({ status: 'dead_letter', nextAttemptAt: null, attempts: 6, lastResponseStatus: 500 })
          .where('subscriptionId', '=', ids.dead)
          .execute();
        await db.db
          .insertInto('webhookWorkers')
          .values({ id: 'wkr_killed', startedAt: long, heartbeatAt: long })
          .execute();
        const [inFlight] = await db.db
          .selectFrom('webhookDeliveries')
          .select('id')
          .where('subscriptionId', '=', ids.plain)
          .orderBy('id')
          .limit(1)
          .execute();
        await db.db
          .updateTable('webhookDeliveries')
          .set({ status: 'in_flight', claimedAt: long, claimedBy: 'wkr_killed', attempts: 1 })
          .where('id', '=', inFlight.id)
          .execute();

        // The migration, while the previous release serves; then it queues more.
        runShell('node bin/tourops.js migrate', env);
        await writeClients(3, 1);
        const expected = await db.db
          .selectFrom('webhookDeliveries')
          .select(['id', 'subscriptionId', 'eventId', 'sequence'])
          .where('status', 'in', ['pending', 'in_flight'])
          .execute();
        // 4 clients to 5 subscriptions, less the 3 dead letters.
        assert.equal(expected.length, 4 * 5 - 3);
        // Only the `per_object` subscription's queue rows carry their object and sequence.
        const keyed = await db.db
          .selectFrom('webhookQueue')
          .select(['subscriptionId'])
          .where('objectKey', 'is not', null)
          .where('sequence', 'is not', null)
          .execute();
        assert.deepEqual(
          keyed.map((row) => row.subscriptionId),
          [ids.ordered, ids.ordered, ids.ordered, ids.ordered],
        );

        servers.push(await startTourops(['serve'], env));
        const path = (id: string) =>
          `/queue-${backend}/${Object.entries(ids).find(([, value]) => value === id)?.[0]}`;
        const received = () =>
          receiver.requests
            .filter((r) => r.path.startsWith(`/queue-${backend}/`))
            .map((r) => {
              const body = JSON.parse(r.body);
              return `${r.path} ${body.id} ${body.sequence}`;
            });
        await eventually(() => received().length >= expected.length, 'every queued delivery');
        // Nothing is left to send: then a second send of any would have been made by now.
        await until(async () => {
          const { n } = await db.db
            .selectFrom('webhookQueue')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .executeTakeFirstOrThrow();
          return Number(n) === 0 ? true : undefined;
        }, 'the queue emptied');
        assert.deepEqual(
          received().sort(),
          expected.map((d) => `${path(d.subscriptionId)} ${d.eventId} ${d.sequence}`).sort(),
          'each sent once, with its sequence',
        );

        const lost = await db.db
          .selectFrom('webhookAttempts')
          .select('attempt')
          .where('deliveryId', '=', inFlight.id)
          .execute();
        assert.deepEqual(lost, [{ attempt: 1 }], 'the killed attempt sent again as itself');
        const held = await attemptLog(db.db, ids.held);
        assert.ok(
          held.every((a) => a.startMs >= Date.parse(heldUntil)),
          'none before the hold',
        );
        const paced = await attemptLog(db.db, ids.paced);
        assert.ok(mostWithin(paced.map((a) => a.startMs)) <= 1, 'one a second');
        assertNoErrorLogged(servers);
      } finally {
        await Promise.all(servers.map((server) => server.stop()));
        await db.close();
        await database.drop();
      }
    });
  }
});
