import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ADMIN_TOKEN, BACKENDS, createTestDatabase, type TestDatabase } from './helpers/context.ts';
import {
  adminTenantToken,
  type ChildService,
  callService,
  startTourops,
} from './helpers/processes.ts';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A pro tenant with an all-scopes token, made through the admin API of `server`. */
async function tenantToken(server: ChildService): Promise<string> {
  const slug = `scale-${Math.random().toString(36).slice(2, 8)}`;
  const { token } = await adminTenantToken(server, ADMIN_TOKEN, {
    name: 'Scale out',
    slug,
    tier: 'pro',
  });
  return token;
}

// Real OS processes (`tourops serve`) on one PostgreSQL, as users scale out.
if (BACKENDS.includes('postgres')) {
  for (const store of ['postgres', 'redis'] as const) {
    describe(`two API processes on one PostgreSQL (rate-limit counters in ${store})`, () => {
      let database: TestDatabase;
      let servers: ChildService[] = [];

      before(async () => {
        database = await createTestDatabase('postgres');
        const env = {
          ...database.env,
          ADMIN_API_TOKEN: ADMIN_TOKEN,
          RATE_LIMIT_PER_MIN: '20',
          RATE_LIMIT_BURST_PER_SEC: '1000',
          ...(store === 'redis' ? { REDIS_URL } : {}),
        };
        // Sequential: the second finds the schema migrated by the first.
        servers = [await startTourops(['serve', '--no-worker'], env)];
        servers.push(await startTourops(['serve', '--no-worker'], env));
      });
      after(async () => {
        await Promise.all(servers.map((server) => server.stop()));
        await database.drop();
      });

      it('enforce one per-token limit together', async () => {
        const token = await tenantToken(servers[0]);
        const statuses: number[] = [];
        for (let i = 0; i < 40; i++) {
          statuses.push((await callService(servers[i % 2], 'GET', '/api/v1/me', token)).status);
        }
        assert.equal(statuses.filter((status) => status === 200).length, 20, `${statuses}`);
        assert.ok(
          statuses.every((status) => status === 200 || status === 429),
          `${statuses}`,
        );
      });

      if (store === 'postgres') {
        it('let exactly one of 16 concurrent keyed duplicates execute', async () => {
          const token = await tenantToken(servers[1]);
          const body = { kind: 'company', displayName: 'Exactly once' };
          const answers = await Promise.all(
            Array.from({ length: 16 }, (_, i) =>
              callService(servers[i % 2], 'POST', '/api/v1/clients', token, body, {
                'idempotency-key': 'scale-out-once',
              }),
            ),
          );
          const executed = answers.filter(
            (a) => a.status === 201 && !a.headers.has('idempotency-replayed'),
          );
          assert.equal(executed.length, 1, answers.map((a) => a.status).join(','));
          for (const answer of answers) {
            if (answer.status === 201) assert.equal(answer.text, executed[0].text);
            else assert.equal(answer.status, 409); // still running after 2 s: in progress
          }
          const list = await callService(servers[0], 'GET', '/api/v1/clients', token);
          const names = JSON.parse(list.text).data.map(
            (c: { displayName: string }) => c.displayName,
          );
          assert.deepEqual(names, ['Exactly once']);
        });
      }
    });
  }
}
