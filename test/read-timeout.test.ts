import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { createDatabase, type Database } from '../src/db/database.ts';
import { isDatabaseUnavailable } from '../src/db/unavailable.ts';
import { TIMER_SLACK_MS } from './helpers/clock.ts';
import { createTestDatabase, type TestDatabase } from './helpers/context.ts';

// A real server that does not answer in time: pg_sleep outlasts the read time-out, and the
// transaction turns the server's statement_timeout off, so only the client can give up.
const STATEMENT_TIMEOUT_MS = 200;
const READ_TIMEOUT_MS = STATEMENT_TIMEOUT_MS + 1_000;

async function failure(promise: Promise<unknown>): Promise<{ error: Error; ms: number }> {
  const started = performance.now();
  try {
    await promise;
  } catch (error) {
    return { error: error as Error, ms: performance.now() - started };
  }
  assert.fail('the query answered');
}

describe('PostgreSQL read time-out (a connection the server stopped answering)', {
  skip: process.env.TEST_DATABASE_URL ? false : 'TEST_DATABASE_URL is not set',
}, () => {
  let testDb: TestDatabase;
  let database: Database;

  before(async () => {
    testDb = await createTestDatabase('postgres');
    database = createDatabase({
      databaseUrl: testDb.env.DATABASE_URL ?? null,
      dataDir: '',
      poolSize: 2,
      statementTimeoutMs: STATEMENT_TIMEOUT_MS,
    });
  });
  after(async () => {
    await database.close();
    await testDb.drop();
  });

  const unanswered = () =>
    database.withTransaction(async () => {
      await sql`set local statement_timeout = 0`.execute(database.db);
      await sql`select pg_sleep(3)`.execute(database.db);
    });

  it('fails a statement with no answer within the time-out, as unavailable, and the pool goes on', async () => {
    const { error, ms } = await failure(unanswered());
    assert.ok(isDatabaseUnavailable(error), error.message);
    // The server would have answered, and the statement succeeded, after 3 s: failing at all is
    // the client giving up; not before its time-out.
    assert.ok(ms >= READ_TIMEOUT_MS - TIMER_SLACK_MS, `failed after ${ms} ms`);
    const { rows } = await sql<{ one: number }>`select 1 as one`.execute(database.db);
    assert.deepEqual(rows, [{ one: 1 }]);
  });

  it('fails the COMMIT pipelined behind it too (an idempotent answer), at once with it', async () => {
    const transaction = await database.beginAmbient();
    await transaction.run(() => sql`set local statement_timeout = 0`.execute(database.db));
    const { error, ms } = await failure(
      transaction.commitWith(() => sql`select pg_sleep(3)`.execute(database.db)),
    );
    assert.ok(isDatabaseUnavailable(error), error.message);
    assert.ok(ms >= READ_TIMEOUT_MS - TIMER_SLACK_MS, `failed after ${ms} ms`);
    const { rows } = await sql<{ one: number }>`select 1 as one`.execute(database.db);
    assert.deepEqual(rows, [{ one: 1 }]);
  });

  it('leaves answers within the time-out alone, and an idle transaction', async () => {
    await database.withTransaction(async () => {
      await sql`set local statement_timeout = 0`.execute(database.db);
      // Each answers within the time-out, one after another on the transaction's connection.
      for (let i = 0; i < 4; i++) await sql`select pg_sleep(0.4)`.execute(database.db);
      // In a transaction with nothing outstanding: not the server's silence.
      await sleep(READ_TIMEOUT_MS * 1.5);
      const { rows } = await sql<{ two: number }>`select 2 as two`.execute(database.db);
      assert.deepEqual(rows, [{ two: 2 }]);
    });
  });
});
