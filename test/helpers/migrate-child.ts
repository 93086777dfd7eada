import { createDatabase } from '../../src/db/database.ts';
import { migrate } from '../../src/db/migrate.ts';

/** A separate process that migrates the database named by its environment; prints what it applied. */
const database = createDatabase({
  databaseUrl: process.env.DATABASE_URL ?? null,
  dataDir: process.env.DATA_DIR as string,
});
try {
  process.stdout.write(JSON.stringify(await migrate(database)));
} finally {
  await database.close();
}
