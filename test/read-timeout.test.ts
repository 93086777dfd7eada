import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { clientWithReadTimeout } from '../src/db/read-timeout.ts';
import { isDatabaseUnavailable } from '../src/db/unavailable.ts';

// A real server that does not answer in time: pg_sleep outlasts the read time-out (no
// statement_timeout here, so only the client can give up).
const url = process.env.TEST_DATABASE_URL;
const READ_TIMEOUT_MS = 300;

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
  skip: url ? false : 'TEST_DATABASE_URL is not set',
}, () => {
  let pool: pg.Pool;

  before(() => {
    pool = new pg.Pool({
      connectionString: url,
      max: 2,
      Client: clientWithReadTimeout(READ_TIMEOUT_MS),
    });
    pool.on('error', () => undefined);
  });
  after(async () => {
    await pool.end();
  });

  it('fails a query with no answer within the time-out, as unavailable, and the pool goes on', async () => {
    const client = await pool.connect();
    client.on('error', () => undefined);
    const { error, ms } = await failure(client.query('select pg_sleep(3)')).finally(() =>
      client.release(true),
    );
    assert.ok(isDatabaseUnavailable(error), error.message);
    // The time-out and at most one sweep (1/8 of it), with slack for a loaded machine; the
    // server would have answered after 3 s.
    assert.ok(ms >= READ_TIMEOUT_MS && ms < READ_TIMEOUT_MS * 5, `failed after ${ms} ms`);
    assert.deepEqual((await pool.query('select 1 as one')).rows, [{ one: 1 }]);
  });

  it("cuts pg-pool's own query too (callback form, as the rate limiter's store calls it)", async () => {
    const { error, ms } = await failure(pool.query('select pg_sleep(3)'));
    assert.ok(isDatabaseUnavailable(error), error.message);
    assert.ok(ms < READ_TIMEOUT_MS * 5, `failed after ${ms} ms`);
  });

  it('leaves answers within the time-out alone, queued or not, and an idle transaction', async () => {
    const client = await pool.connect();
    try {
      // Each answers within the time-out; together they take longer, queued on one connection.
      const answers = await Promise.all(
        [1, 2, 3, 4].map(() => client.query('select pg_sleep(0.1) as slept')),
      );
      assert.equal(answers.length, 4);
      // Checked out, in a transaction, with nothing outstanding: not the server's silence.
      await client.query('begin');
      await sleep(READ_TIMEOUT_MS * 2);
      assert.deepEqual((await client.query('select 2 as two')).rows, [{ two: 2 }]);
      await client.query('commit');
    } finally {
      client.release();
    }
  });

  it("cuts a connection in pg's pipeline mode too (the API's pool), where end() waits for answers", async () => {
    const pipelined = new pg.Pool({
      connectionString: url,
      max: 1,
      pipeline: true,
      Client: clientWithReadTimeout(READ_TIMEOUT_MS),
    });
    pipelined.on('error', () => undefined);
    try {
      const client = await pipelined.connect();
      client.on('error', () => undefined);
      // Two on the wire at once: both fail with the connection.
      const results = await Promise.allSettled([
        failure(client.query('select pg_sleep(3)')),
        failure(client.query('select 1')),
      ]).finally(() => client.release(true));
      for (const result of results) {
        assert.equal(result.status, 'fulfilled');
        const { error, ms } = result.value;
        assert.ok(isDatabaseUnavailable(error), error.message);
        assert.ok(ms < READ_TIMEOUT_MS * 5, `failed after ${ms} ms`);
      }
      assert.deepEqual((await pipelined.query('select 1 as one')).rows, [{ one: 1 }]);
    } finally {
      await pipelined.end();
    }
  });
});
