import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type Kysely, sql } from 'kysely';
import { createDatabase, type Database } from '../src/db/database.ts';
import { prepare } from '../src/db/prepared.ts';
import { BACKENDS, createTestDatabase, type TestDatabase } from './helpers/context.ts';

for (const backend of BACKENDS) {
  describe(`prepared queries (${backend})`, () => {
    let testDb: TestDatabase;
    let database: Database;
    // A table of this test's own, outside the typed schema.
    let db: Kysely<Record<string, Record<string, unknown>>>;
    let byId: (id: string) => Promise<Record<string, unknown>[]>;

    before(async () => {
      testDb = await createTestDatabase(backend);
      // One connection, so the session whose prepared statements are inspected is the query's.
      database = createDatabase({
        databaseUrl: testDb.env.DATABASE_URL ?? null,
        dataDir: testDb.env.DATA_DIR ?? '',
        poolSize: 1,
      });
      db = database.db as unknown as typeof db;
      await sql`create table notes (id varchar(20) primary key, body text not null)`.execute(db);
      await sql`insert into notes (id, body) values ('n1', 'one'), ('n2', 'two')`.execute(db);
      byId = prepare(database.db, (id: string) =>
        db.selectFrom('notes').selectAll().where('id', '=', id),
      ) as typeof byId;
    });
    after(async () => {
      await database.close();
      await testDb.drop();
    });

    it('binds new values on every call, alone and inside a transaction', async () => {
      assert.deepEqual(await byId('n1'), [{ id: 'n1', body: 'one' }]);
      assert.deepEqual(await byId('n2'), [{ id: 'n2', body: 'two' }]);
      assert.deepEqual(await byId('none'), []);
      const inside = await database.withTransaction(async () => {
        await sql`update notes set body = 'uno' where id = 'n1'`.execute(db);
        return byId('n1');
      });
      assert.deepEqual(inside, [{ id: 'n1', body: 'uno' }]);
    });

    if (backend === 'postgres') {
      const preparedHere = async () =>
        (
          await sql<{ n: number }>`select count(*)::int as n from pg_prepared_statements
            where name like 'tourops_%'`.execute(db)
        ).rows[0].n;

      it('is parsed and planned once per connection: the server keeps it by name', async () => {
        await byId('n1');
        assert.ok((await preparedHere()) >= 1, 'a named statement in this session');
      });

      it('answers after a migration changes the table under it, on a fresh connection', async () => {
        await byId('n2');
        // Another session (a `tourops migrate` of a newer release) adds a column.
        const other = createDatabase({ databaseUrl: testDb.env.DATABASE_URL ?? null, dataDir: '' });
        try {
          await sql`alter table notes add column tag text`.execute(other.db);
        } finally {
          await other.close();
        }
        // Outside a transaction the query is retried unnamed; the stale session is replaced.
        assert.deepEqual(await byId('n2'), [{ id: 'n2', body: 'two', tag: null }]);
        assert.deepEqual(await byId('n2'), [{ id: 'n2', body: 'two', tag: null }]);

        await sql`alter table notes drop column tag`.execute(db);
        // Inside a transaction a retry would meet an aborted transaction: the error surfaces,
        // the transaction rolls back, and the connection after it works.
        await assert.rejects(
          database.withTransaction(async () => {
            await sql`update notes set body = 'zwei' where id = 'n2'`.execute(db);
            return byId('n2');
          }),
          (error: { code?: string }) => error.code === '0A000',
        );
        assert.deepEqual(await byId('n2'), [{ id: 'n2', body: 'two' }]);
      });
    }
  });
}
