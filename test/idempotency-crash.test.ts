import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ADMIN_TOKEN, BACKENDS, createTestDatabase, type TestDatabase } from './helpers/context.ts';
import {
  adminTenantToken,
  type ChildService,
  callService,
  startTourops,
} from './helpers/processes.ts';

const WRITES = 120;

// A real `tourops serve` killed with SIGKILL while keyed writes are in flight, then restarted on
// the same database: every key must be usable at once, and every write must have happened once.
for (const backend of BACKENDS) {
  describe(`Idempotency-Key across kill -9 of the server (${backend})`, () => {
    let database: TestDatabase;
    let server: ChildService | null = null;
    let env: Record<string, string>;

    before(async () => {
      database = await createTestDatabase(backend);
      env = {
        ...database.env,
        ADMIN_API_TOKEN: ADMIN_TOKEN,
        RATE_LIMIT_BURST_PER_SEC: '100000',
        RATE_LIMIT_PER_MIN: '1000000',
        RATE_LIMIT_IP_PER_MIN: '1000000',
      };
    });
    after(async () => {
      await server?.stop('SIGKILL');
      await database.drop();
    });

    it('frees the key of every write that did not commit, and runs each write once', async () => {
      server = await startTourops(['serve', '--no-worker'], env);
      const { token } = await adminTenantToken(server, ADMIN_TOKEN, {
        name: 'Crash',
        slug: `crash-${Math.random().toString(36).slice(2, 8)}`,
        tier: 'pro',
      });

      const keys = Array.from({ length: WRITES }, (_, i) => `crash-${i}-${Math.random()}`);
      const create = (target: ChildService, key: string) =>
        callService(
          target,
          'POST',
          '/api/v1/clients',
          token,
          { kind: 'individual', displayName: key },
          {
            'idempotency-key': key,
          },
        );

      // All at once, and the process killed once a few have been answered: the rest are queued
      // or mid-transaction.
      const victim = server;
      let answered = 0;
      const killed = new Promise<void>((resolve) => {
        for (const key of keys) {
          create(victim, key)
            .then(() => {
              answered += 1;
              if (answered === 10) {
                victim.child.kill('SIGKILL');
                resolve();
              }
            })
            .catch(() => undefined);
        }
      });
      await killed;
      await victim.stop('SIGKILL');
      assert.ok(answered < WRITES, 'some writes were still in flight when the server died');

      server = await startTourops(['serve', '--no-worker'], env);
      const restarted = server;
      const retries = await Promise.all(keys.map((key) => create(restarted, key)));
      const statuses = retries.map((retry) => retry.status);
      // A retry that found its key held by the dead process would wait for its answer, then
      // answer 409 `idempotency-in-progress`: none did.
      assert.deepEqual(
        statuses.filter((status) => status !== 201),
        [],
        'every retry created (first run) or replayed the client, none is still "in progress"',
      );
      const replayed = retries.filter(
        (retry) => retry.headers.get('idempotency-replayed') === 'true',
      );
      assert.ok(
        replayed.length >= 10,
        `the writes answered before the kill replay (${replayed.length})`,
      );

      const names: string[] = [];
      let cursor: string | null = null;
      do {
        const page = await callService(
          restarted,
          'GET',
          `/api/v1/clients?limit=100${cursor ? `&cursor=${cursor}` : ''}`,
          token,
        );
        const body = JSON.parse(page.text);
        names.push(...body.data.map((client: { displayName: string }) => client.displayName));
        cursor = body.meta.hasMore ? body.meta.cursor : null;
      } while (cursor);
      assert.equal(names.length, WRITES, 'one client per key, no duplicate, none lost');
      assert.deepEqual([...new Set(names)].sort(), [...keys].sort());
    });
  });
}
