import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { ConfigError, loadConfig } from '../src/config.ts';
import { createRuntime } from '../src/runtime.ts';
import { BACKENDS, createTestDatabase, type TestDatabase } from './helpers/context.ts';
import { BIN, ROOT } from './helpers/processes.ts';

const silent = pino({ level: 'silent' });
const newKey = () => randomBytes(32).toString('hex');

for (const backend of BACKENDS) {
  describe(`a SECRET_KEY that does not open the database (${backend})`, () => {
    let database: TestDatabase;
    const keyA = newKey();

    before(async () => {
      database = await createTestDatabase(backend);
    });
    after(() => database.drop());

    const start = (secretKey: string) =>
      createRuntime(
        loadConfig({
          ...database.env,
          SECRET_KEY: secretKey,
          WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
          LOG_LEVEL: 'silent',
        }),
        { logger: silent },
      );
    const refusal = {
      name: 'ConfigError',
      message:
        /^SECRET_KEY: the key from the SECRET_KEY variable does not open what this database holds/,
    };

    it('is refused at start-up, naming SECRET_KEY; the right key still starts', async () => {
      await (await start(keyA)).close();
      await assert.rejects(start(newKey()), refusal);
      await (await start(keyA)).close();
    });

    it('is refused on a database from before the check, by a signing key it holds', async () => {
      const runtime = await start(keyA);
      const tenant = await runtime.services.tenants.create({
        name: 'Keys',
        slug: `keys-${randomBytes(3).toString('hex')}`,
        tier: 'pro',
      });
      await runtime.services.webhooks.create(tenant.id, {
        url: 'https://127.0.0.1:9/hook',
        events: ['client.created'],
      });
      // As a database written before the check existed.
      await runtime.database.db.deleteFrom('instanceSettings').execute();
      await runtime.close();
      await assert.rejects(start(newKey()), refusal);
      const right = await start(keyA);
      const check = await right.database.db.selectFrom('instanceSettings').select('name').execute();
      assert.deepEqual(check, [{ name: 'secret_key_check' }]);
      await right.close();
    });

    it('stops `tourops serve` and the CLI with one line and exit code 1', async () => {
      for (const args of [
        ['serve', '--no-worker'],
        ['tenant', 'list'],
      ]) {
        const result = spawnSync(process.execPath, [BIN, ...args], {
          cwd: ROOT,
          env: {
            PATH: process.env.PATH ?? '',
            LOG_LEVEL: 'warn',
            PORT: '0',
            ...database.env,
            SECRET_KEY: newKey(),
          },
          encoding: 'utf8',
          timeout: 30_000,
        });
        const output = `${result.stdout}${result.stderr}`.trim();
        assert.equal(result.status, 1, output);
        assert.match(output, /^tourops: SECRET_KEY: the key from the SECRET_KEY variable/);
        assert.equal(output.split('\n').length, 1, output);
      }
    });
  });
}

describe('the key generated into DATA_DIR', () => {
  it('names the file it read when it does not open the database', async () => {
    const database = await createTestDatabase('sqlite');
    try {
      const config = loadConfig({ DATA_DIR: database.env.DATA_DIR, LOG_LEVEL: 'silent' });
      await (await createRuntime(config, { logger: silent })).close();
      const other = loadConfig({
        DATA_DIR: database.env.DATA_DIR,
        SECRET_KEY: newKey(),
        LOG_LEVEL: 'silent',
      });
      await assert.rejects(createRuntime(other, { logger: silent }), ConfigError);
      // With the generated file (no variable), the message names that file.
      writeFileSync(`${database.env.DATA_DIR}/secret.key`, `${newKey()}\n`);
      await assert.rejects(createRuntime(config, { logger: silent }), {
        message: new RegExp(`the key from ${database.env.DATA_DIR}/secret\\.key does not open`),
      });
    } finally {
      await database.drop();
    }
  });
});
