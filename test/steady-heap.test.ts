import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { writeHeapSnapshot } from 'node:v8';
import { sql } from 'kysely';
import { loadConfig } from '../src/config.ts';
import { createDatabase } from '../src/db/database.ts';
import { BACKENDS, createTestDatabase } from './helpers/context.ts';

// The database interface keeps nothing per statement: what a statement leaves behind (a reaction
// on a promise that stays pending for the life of the pool, an entry in a map never emptied)
// grows the old generation, and each mark-compact of it stalls every request under way. The
// outage breaker's checkouts once raced one promise, pending as long as the pool was healthy:
// six objects kept a statement, and under load a mark-compact of 90 ms every 10 s.

/**
 * Objects alive on the heap once what was scheduled has run: a heap snapshot's node count (the
 * snapshot collects garbage first). Counting objects, not bytes: `heapUsed` also moves with
 * compiled code and page fragmentation.
 */
async function liveObjects(): Promise<number> {
  for (let turn = 0; turn < 3; turn++) await new Promise((resolve) => setImmediate(resolve));
  const dir = mkdtempSync(join(tmpdir(), 'tourops-heap-'));
  try {
    const file = writeHeapSnapshot(join(dir, 'heap.heapsnapshot'));
    const { snapshot } = JSON.parse(readFileSync(file, 'utf8'));
    return snapshot.node_count;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const STATEMENTS = 6_000;
/** Objects a statement may seem to leave: a leak leaves several a statement. */
const ALLOWED_PER_STATEMENT = 0.2;

for (const backend of BACKENDS) {
  describe(`a long run of statements (${backend})`, () => {
    it('keeps no object a statement once warm', async () => {
      const target = await createTestDatabase(backend);
      const config = loadConfig({ ...target.env, LOG_LEVEL: 'silent' });
      // Serving settings: statement time-outs, hence the outage breaker on PostgreSQL.
      const database = createDatabase({
        databaseUrl: config.databaseUrl,
        dataDir: config.dataDir,
        statementTimeoutMs: config.database.statementTimeoutMs,
        connectTimeoutMs: config.database.connectTimeoutMs,
      });
      try {
        // Twenty at a time, as under load: on PostgreSQL the pool's checkouts queue.
        const run = async (count: number) => {
          for (let done = 0; done < count; done += 20) {
            await Promise.all(
              Array.from({ length: 20 }, (_, i) =>
                i % 4 === 0
                  ? database.withTransaction(() => sql`select 1`.execute(database.db))
                  : sql`select 1`.execute(database.db),
              ),
            );
          }
        };
        // Long enough that the JIT has compiled what it will (optimized code is heap too).
        await run(3_000);
        const before = await liveObjects();
        await run(STATEMENTS);
        const grown = (await liveObjects()) - before;
        assert.ok(
          grown < ALLOWED_PER_STATEMENT * STATEMENTS,
          `${STATEMENTS} statements left ${grown} more objects alive`,
        );
      } finally {
        await database.close();
        await target.drop();
      }
    });
  });
}
