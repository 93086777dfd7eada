import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createDatabase } from '../src/db/database.ts';
import { migrate, migrations } from '../src/db/migrate.ts';
import { BACKENDS, createTestDatabase } from './helpers/context.ts';

const run = promisify(execFile);
const child = fileURLToPath(new URL('./helpers/migrate-child.ts', import.meta.url));

for (const backend of BACKENDS) {
  describe(`migrations (${backend})`, () => {
    it('apply exactly once when three processes start together', async () => {
      const target = await createTestDatabase(backend);
      try {
        const env = { ...process.env, ...target.env };
        const outputs = await Promise.all(
          [1, 2, 3].map(() => run(process.execPath, ['--import', 'tsx', child], { env })),
        );
        const applied = outputs.flatMap((output) => JSON.parse(output.stdout) as string[]);
        assert.deepEqual(applied.sort(), migrations.map((m) => m.id).sort());

        const database = createDatabase({
          databaseUrl: target.env.DATABASE_URL ?? null,
          dataDir: target.env.DATA_DIR,
        });
        try {
          assert.deepEqual(await migrate(database), [], 'nothing left to apply');
          const rows = await database.db.selectFrom('schemaMigrations').selectAll().execute();
          assert.equal(rows.length, migrations.length);
        } finally {
          await database.close();
        }
      } finally {
        await target.drop();
      }
    });
  });
}
