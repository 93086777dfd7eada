import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import pino from 'pino';
import { verifyWebhook } from '../sdk/src/index.ts';
import { loadConfig } from '../src/config.ts';
import { createRuntime } from '../src/runtime.ts';
import { startWorker } from '../src/start-worker.ts';
import { BACKENDS, createTestContext, createTestDatabase } from './helpers/context.ts';
import { createTenant } from './helpers/fixtures.ts';
import { HttpsReceiver, testCa } from './helpers/https-receiver.ts';
import { BIN, ROOT } from './helpers/processes.ts';
import { until } from './helpers/until.ts';

const tourops = (args: string[], env: Record<string, string>) =>
  spawnSync(process.execPath, [BIN, ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', ...env },
    encoding: 'utf8',
  });

describe('tourops backup', () => {
  it('copies a serving embedded database; restored elsewhere, it signs with a key made before', async () => {
    const ca = await testCa();
    const webhookEnv = { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', WEBHOOK_CA_FILE: ca.caFile };
    const receiver = await HttpsReceiver.start();
    const out = mkdtempSync(join(tmpdir(), 'tourops-backup-'));
    const restored = mkdtempSync(join(tmpdir(), 'tourops-restored-'));
    try {
      // The original, serving while the backup runs.
      const ctx = await createTestContext('sqlite', { env: webhookEnv });
      let tenantId: string;
      let signingKey: string;
      try {
        const tenant = await createTenant(ctx, { tier: 'pro' });
        tenantId = tenant.id;
        const created = await ctx.api('POST', '/api/v1/webhooks', {
          token: tenant.token,
          body: { url: receiver.url('/restored'), events: ['client.created'] },
        });
        signingKey = created.json().signingKey;
        const file = join(out, 'copy.sqlite');
        const backup = tourops(['backup', file, '--json'], ctx.env);
        assert.equal(backup.status, 0, backup.stderr);
        assert.deepEqual(JSON.parse(backup.stdout), {
          database: file,
          secretKey: `${file}.secret.key`,
        });
        for (const written of [file, `${file}.secret.key`]) {
          assert.equal(statSync(written).mode & 0o777, 0o600, written);
        }
        // A second backup to the same file is refused, not overwritten.
        assert.equal(tourops(['backup', file], ctx.env).status, 2);
        // Written after the backup: not in the copy.
        await ctx.api('POST', '/api/v1/clients', {
          token: tenant.token,
          body: { kind: 'individual', displayName: 'After the backup' },
        });
      } finally {
        await ctx.close();
      }

      // Restored into a fresh DATA_DIR, as the README says.
      copyFileSync(join(out, 'copy.sqlite'), join(restored, 'tourops.sqlite'));
      copyFileSync(join(out, 'copy.sqlite.secret.key'), join(restored, 'secret.key'));
      const config = loadConfig({ DATA_DIR: restored, LOG_LEVEL: 'silent', ...webhookEnv });
      const runtime = await createRuntime(config, { logger: pino({ level: 'silent' }) });
      const worker = startWorker(runtime, { pollIntervalMs: 50 });
      try {
        const clients = await runtime.repositories.clients.list(tenantId, {
          afterId: null,
          limit: 10,
        });
        assert.ok(!clients.some((c) => c.displayName === 'After the backup'));
        await runtime.services.clients.create(tenantId, {
          kind: 'individual',
          displayName: 'Restored',
        });
        const delivery = await until(async () =>
          receiver.requests.find((r) => r.path === '/restored' && r.body.includes('Restored')),
        );
        // Signed with the key created before the backup: the restored service could decrypt it.
        const event = verifyWebhook(delivery.body, delivery.headers, signingKey);
        assert.equal(event.type, 'client.created');
      } finally {
        await worker.stop();
        await runtime.close();
      }
    } finally {
      await receiver.close();
      rmSync(out, { recursive: true, force: true });
      rmSync(restored, { recursive: true, force: true });
    }
  });

  if (BACKENDS.includes('postgres')) {
    it('points to pg_dump on PostgreSQL', async () => {
      const database = await createTestDatabase('postgres');
      try {
        const env = { ...database.env, SECRET_KEY: 'a'.repeat(43) };
        const result = tourops(['backup', join(tmpdir(), 'never-written.sqlite')], env);
        assert.equal(result.status, 1);
        assert.match(result.stderr, /use pg_dump \(and keep SECRET_KEY\)/);
      } finally {
        await database.drop();
      }
    });
  }
});
