import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { createDatabase, type Database } from '../src/db/database.ts';
import { BACKENDS, createTestDatabase, type TestDatabase } from './helpers/context.ts';

for (const backend of BACKENDS) {
  describe(`ambient transactions (${backend})`, () => {
    let testDb: TestDatabase;
    let database: Database;

    before(async () => {
      testDb = await createTestDatabase(backend);
      database = createDatabase({
        databaseUrl: testDb.env.DATABASE_URL ?? null,
        dataDir: testDb.env.DATA_DIR ?? '',
      });
      await sql`create table notes (id varchar(20) primary key)`.execute(database.db);
    });
    after(async () => {
      await database.close();
      await testDb.drop();
    });

    const insert = (id: string) => sql`insert into notes (id) values (${id})`.execute(database.db);
    const ids = async () =>
      (await sql<{ id: string }>`select id from notes order by id`.execute(database.db)).rows.map(
        (row) => row.id,
      );

    it('joins every query and nested transaction of its context; a failed nested one is undone alone', async () => {
      const transaction = await database.beginAmbient();
      await transaction.run(async () => {
        await insert('a1');
        await database.db.transaction().execute(async (trx) => {
          await sql`insert into notes (id) values ('a2')`.execute(trx);
        });
        await assert.rejects(
          database.db.transaction().execute(async (trx) => {
            await sql`insert into notes (id) values ('a3')`.execute(trx);
            throw new Error('refused');
          }),
          /refused/,
        );
        // Visible inside, before the commit.
        assert.deepEqual(await ids(), ['a1', 'a2']);
      });
      await transaction.commit();
      assert.deepEqual(await ids(), ['a1', 'a2']);
    });

    it('rolls back everything of its context', async () => {
      const transaction = await database.beginAmbient();
      await transaction.run(async () => {
        await insert('b1');
        await database.db.transaction().execute(async (trx) => {
          await sql`insert into notes (id) values ('b2')`.execute(trx);
        });
      });
      await transaction.rollback();
      assert.deepEqual(await ids(), ['a1', 'a2']);
    });

    it('keeps other contexts out until it ends, and hands them the database after', async () => {
      const transaction = await database.beginAmbient();
      await transaction.run(() => insert('c1'));
      // Another request's write: waits for the lock (SQLite) or the row (PostgreSQL), never joins.
      const outside = insert('c2');
      await transaction.run(() => insert('c3'));
      await transaction.commit();
      await outside;
      assert.deepEqual(await ids(), ['a1', 'a2', 'c1', 'c2', 'c3']);
      // Late queries of an ended context get a connection of their own.
      await transaction.run(() => insert('c4'));
      await transaction.commit();
      assert.ok((await ids()).includes('c4'));
    });
  });
}
