import assert from 'node:assert/strict';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { createDatabase, type Database } from '../src/db/database.ts';
import { createTestDatabase, type TestDatabase } from './helpers/context.ts';

/**
 * A TCP relay between the API's pool and PostgreSQL on loopback that counts round trips: what the
 * pool sends before the server has answered anything since its previous sending is one trip
 * (statements written back to back without waiting for an answer count once).
 */
async function countingRelay(
  target: URL,
): Promise<{ url: URL; roundTrips(): number; close(): Promise<void> }> {
  let roundTrips = 0;
  let answered = true;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    sockets.add(client).add(upstream);
    client.on('data', () => {
      if (answered) roundTrips += 1;
      answered = false;
    });
    upstream.on('data', () => {
      answered = true;
    });
    client.pipe(upstream).pipe(client);
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no relay address');
  const url = new URL(target);
  url.hostname = '127.0.0.1';
  url.port = String(address.port);
  return {
    url,
    roundTrips: () => roundTrips,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('PostgreSQL statements pipelined in one round trip (BEGIN, SAVEPOINT, COMMIT behind an answer)', {
  skip: process.env.TEST_DATABASE_URL ? false : 'TEST_DATABASE_URL is not set',
}, () => {
  let testDb: TestDatabase;
  let relay: Awaited<ReturnType<typeof countingRelay>>;
  let database: Database;

  before(async () => {
    testDb = await createTestDatabase('postgres');
    relay = await countingRelay(new URL(testDb.env.DATABASE_URL));
    // One connection: every statement of the test goes through the same, already open, socket.
    database = createDatabase({ databaseUrl: relay.url.toString(), dataDir: '', poolSize: 1 });
    await sql`create table notes (id varchar(20) primary key)`.execute(database.db);
  });
  after(async () => {
    await database.close();
    await relay.close();
    await testDb.drop();
  });

  const insert = (id: string) => sql`insert into notes (id) values (${id})`.execute(database.db);
  const roundTripsOf = async (work: () => Promise<unknown>) => {
    const before = relay.roundTrips();
    await work();
    return relay.roundTrips() - before;
  };

  it('a transaction sends BEGIN with its first statement', async () => {
    const trips = await roundTripsOf(() =>
      database.withTransaction(async () => {
        await insert('a1');
        await insert('a2');
      }),
    );
    // begin+a1, a2, commit (each awaited in turn, so none can share a trip by chance).
    assert.equal(trips, 3);
  });

  it('an idempotent request: claim with BEGIN, the handler with its SAVEPOINT, the answer with COMMIT', async () => {
    const trips = await roundTripsOf(async () => {
      const transaction = await database.beginAmbient();
      await transaction.run(async () => {
        await insert('b1'); // the claim
        await database.withTransaction(async () => {
          await insert('b2');
          await insert('b3');
        });
      });
      await transaction.commitWith(() => insert('b4')); // the answer
    });
    // begin+b1, savepoint+b2, b3, b4+commit.
    assert.equal(trips, 4);
    const rows = await sql<{
      id: string;
    }>`select id from notes where id like 'b%' order by id`.execute(database.db);
    assert.deepEqual(
      rows.rows.map((row) => row.id),
      ['b1', 'b2', 'b3', 'b4'],
    );
  });

  it('commitWith refuses a second statement once the COMMIT has gone out', async () => {
    const transaction = await database.beginAmbient();
    await transaction.run(() => insert('c1'));
    await assert.rejects(
      transaction.commitWith(async () => {
        await insert('c2');
        await insert('c3');
      }),
      /a second statement after the commit/,
    );
    const rows = await sql<{
      id: string;
    }>`select id from notes where id like 'c%' order by id`.execute(database.db);
    // What went out before the COMMIT is committed; the refused statement never ran.
    assert.deepEqual(
      rows.rows.map((row) => row.id),
      ['c1', 'c2'],
    );
  });
});
