import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { createDatabase, type Database } from '../src/db/database.ts';
import {
  BACKENDS,
  createTestContext,
  createTestDatabase,
  type TestDatabase,
} from './helpers/context.ts';
import { createTenant } from './helpers/fixtures.ts';

for (const backend of BACKENDS) {
  describe(`the unit of work (${backend})`, () => {
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
        await database.withTransaction(() => insert('a2'));
        await assert.rejects(
          database.withTransaction(async () => {
            await insert('a3');
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
        await database.withTransaction(() => insert('b2'));
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

    it('withTransaction commits what its function wrote, or nothing when it throws', async () => {
      await database.withTransaction(async () => {
        await insert('d1');
        // A nested one that fails undoes only its own writes.
        await assert.rejects(
          database.withTransaction(async () => {
            await insert('d2');
            throw new Error('refused');
          }),
          /refused/,
        );
        await insert('d3');
      });
      await assert.rejects(
        database.withTransaction(async () => {
          await insert('e1');
          await insert('e2');
          throw new Error('refused');
        }),
        /refused/,
      );
      const all = await ids();
      assert.ok(all.includes('d1') && all.includes('d3'));
      assert.ok(!all.includes('d2') && !all.includes('e1') && !all.includes('e2'));
    });

    it('undoes only the failed one of several nested transactions, siblings and deeper ones', async () => {
      await database.withTransaction(async () => {
        await database.withTransaction(() => insert('f1'));
        await database.withTransaction(async () => {
          await insert('f2');
          await database.withTransaction(() => insert('f3'));
          await assert.rejects(
            database.withTransaction(async () => {
              await insert('f4');
              throw new Error('refused');
            }),
            /refused/,
          );
          await insert('f5');
        });
        // A sibling at the first depth fails after two have succeeded at it.
        await assert.rejects(
          database.withTransaction(async () => {
            await insert('f6');
            await database.withTransaction(() => insert('f7'));
            throw new Error('refused');
          }),
          /refused/,
        );
        await database.withTransaction(() => insert('f8'));
      });
      const all = (await ids()).filter((id) => id.startsWith('f'));
      assert.deepEqual(all, ['f1', 'f2', 'f3', 'f5', 'f8']);
    });

    it('commitWith commits its statement with the rest, or, when the statement fails, nothing', async () => {
      const transaction = await database.beginAmbient();
      await transaction.run(async () => {
        await insert('g1');
        await database.withTransaction(() => insert('g2'));
      });
      await transaction.commitWith(() => insert('g3'));
      assert.deepEqual(
        (await ids()).filter((id) => id.startsWith('g')),
        ['g1', 'g2', 'g3'],
      );

      const failing = await database.beginAmbient();
      await failing.run(() => insert('h1'));
      // A duplicate key: the statement fails at the server, after its COMMIT was sent with it.
      await assert.rejects(
        failing.commitWith(() => insert('g1')),
        (error: Error) => /unique|duplicate/i.test(error.message),
      );
      await failing.rollback();
      assert.ok(!(await ids()).includes('h1'));
      // The connection went back clean: the next transactions run and commit.
      await database.withTransaction(() => insert('h2'));
      assert.ok((await ids()).includes('h2'));
    });

    it('commitWith undoes everything when its function fails before any statement', async () => {
      const transaction = await database.beginAmbient();
      await transaction.run(() => insert('i1'));
      await assert.rejects(
        transaction.commitWith(async () => {
          throw new Error('refused');
        }),
        /refused/,
      );
      await transaction.rollback();
      assert.ok(!(await ids()).includes('i1'));
    });

    it('commits transactions and savepoints that ran no statement', async () => {
      const empty = await database.beginAmbient();
      await empty.run(() => database.withTransaction(async () => undefined));
      await empty.commit();
      await database.withTransaction(async () => {
        await database.withTransaction(async () => undefined);
        await insert('j1');
      });
      const rolledBack = await database.beginAmbient();
      await rolledBack.rollback();
      assert.ok((await ids()).includes('j1'));
    });

    it('refuses statements run at once in one transaction, loudly, and keeps none of them', async () => {
      await assert.rejects(
        database.withTransaction(async () => {
          await insert('m0');
          await Promise.all([insert('m1'), insert('m2')]);
        }),
        /overlapping statements in one transaction/,
      );
      await assert.rejects(
        database.withTransaction(() =>
          Promise.all([
            database.withTransaction(() => insert('m3')),
            database.withTransaction(() => insert('m4')),
          ]),
        ),
        /overlapping statements in one transaction/,
      );
      const transaction = await database.beginAmbient();
      await assert.rejects(
        transaction.run(() => Promise.all([insert('m5'), insert('m6')])),
        /overlapping statements/,
      );
      await transaction.rollback();
      assert.deepEqual(
        (await ids()).filter((id) => id.startsWith('m')),
        [],
      );
      // The connections went back clean: the next transactions work.
      await database.withTransaction(() => insert('m7'));
      assert.ok((await ids()).includes('m7'));
    });

    it('runs a transaction again when the server aborts it as a deadlock victim', {
      skip: backend === 'sqlite' && 'SQLite transactions are serial: they cannot deadlock',
    }, async () => {
      await insert('k1');
      await insert('k2');
      let runs = 0;
      // Two transactions lock the same two rows in opposite orders, each waiting for the other
      // to hold its first: one is aborted (40P01) and must be run again, not reported.
      let bothHold = () => {};
      const bothHoldOne = new Promise<void>((resolve) => {
        bothHold = resolve;
      });
      let holding = 0;
      const lockBoth = (first: string, second: string) =>
        database.withTransaction(async () => {
          runs += 1;
          await sql`select id from notes where id = ${first} for update`.execute(database.db);
          if (++holding === 2) bothHold();
          await bothHoldOne;
          await sql`select id from notes where id = ${second} for update`.execute(database.db);
          return first;
        });
      assert.deepEqual(await Promise.all([lockBoth('k1', 'k2'), lockBoth('k2', 'k1')]), [
        'k1',
        'k2',
      ]);
      // At least one rerun; a rerun can meet the other transaction again (each may run three
      // times), so the count above three is not fixed.
      assert.ok(runs >= 3, `${runs} runs`);
    });
  });

  describe(`a service's unit of work (${backend})`, () => {
    it('leaves nothing behind when a step after a repository write throws', async () => {
      const ctx = await createTestContext(backend);
      try {
        const tenant = await createTenant(ctx);
        const { services, repositories } = ctx.runtime;
        const client = { kind: 'individual' as const, displayName: 'Ana Lima' };
        const clients = async () =>
          (await repositories.clients.list(tenant.id, { afterId: null, limit: 100 })).length;
        const before = await clients();
        const events = await repositories.events.listForTenant(tenant.id);
        // The client row is inserted by a repository that was handed no transaction; the event
        // that follows fails. Neither may remain.
        const emit = services.events.emit;
        services.events.emit = async () => {
          throw new Error('the outbox is down');
        };
        try {
          await assert.rejects(services.clients.create(tenant.id, client), /the outbox is down/);
        } finally {
          services.events.emit = emit;
        }
        assert.equal(await clients(), before);
        assert.deepEqual(await repositories.events.listForTenant(tenant.id), events);
        // And the same call with the outbox back commits both.
        await services.clients.create(tenant.id, client);
        assert.equal(await clients(), before + 1);
        assert.equal(
          (await repositories.events.listForTenant(tenant.id)).length,
          events.length + 1,
        );
      } finally {
        await ctx.close();
      }
    });
  });
}
