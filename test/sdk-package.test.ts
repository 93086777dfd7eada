import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { createTestContext, type TestContext } from './helpers/context.ts';
import { createTenant, createTrip, type TenantFixture } from './helpers/fixtures.ts';
import { ROOT } from './helpers/processes.ts';

// The SDK as sdk/README.md says to install it: packed from the repository, installed into a
// project of its own, type-checked there and run against a real server.

const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? tmpdir() };

describe('the SDK installed into a scratch project', () => {
  let ctx: TestContext;
  let tenant: TenantFixture;
  let baseUrl: string;
  let scratch: string;

  before(async () => {
    ctx = await createTestContext('sqlite');
    tenant = await createTenant(ctx);
    for (let i = 0; i < 3; i++) await createTrip(ctx, tenant);
    await ctx.app.listen({ port: 0, host: '127.0.0.1' });
    baseUrl = `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}`;
    scratch = mkdtempSync(join(tmpdir(), 'tourops-sdk-scratch-'));
  });
  after(async () => {
    await ctx.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('packs, installs, type-checks and calls the API', async () => {
    const packed = execFileSync('npm', ['pack', './sdk', '--pack-destination', scratch], {
      cwd: ROOT,
      env,
      encoding: 'utf8',
    });
    const tarball = packed.trim().split('\n').at(-1) as string;
    assert.match(tarball, /^tourops-sdk-\d+\.\d+\.\d+\.tgz$/);
    const contents = execFileSync('tar', ['-tzf', join(scratch, tarball)], { encoding: 'utf8' });
    assert.match(contents, /package\/dist\/index\.d\.ts/);
    assert.match(contents, /package\/README\.md/);
    assert.doesNotMatch(contents, /package\/src\//);

    writeFileSync(
      join(scratch, 'package.json'),
      JSON.stringify({ name: 'scratch', private: true, type: 'module' }),
    );
    execFileSync(
      'npm',
      ['install', '--prefer-offline', '--no-audit', '--no-fund', join(scratch, tarball)],
      { cwd: scratch, env, encoding: 'utf8' },
    );

    // Types resolve through the package's `exports`, as in a user's strict project.
    writeFileSync(
      join(scratch, 'check.ts'),
      [
        "import { TourOps, TourOpsError, verifyWebhook, type WebhookEvent } from '@tourops/sdk';",
        "const api = new TourOps({ token: 'tk_test_x', baseUrl: 'http://localhost:3000' });",
        'export async function titles(): Promise<string[]> {',
        '  const out: string[] = [];',
        "  for await (const trip of api.trips.list({ status: 'active', limit: 5 })) out.push(trip.title);",
        '  return out;',
        '}',
        'export function kind(body: string, headers: Record<string, string>): string {',
        "  const event: WebhookEvent = verifyWebhook(body, headers, ['whsec_x']);",
        "  return event.type === 'booking.confirmed' ? event.data.bookingId : event.type;",
        '}',
        'export const isError = (e: unknown) => e instanceof TourOpsError && e.status === 404;',
        // A wrong field must not type-check: the types are real, not `any`.
        '// @ts-expect-error',
        "api.clients.create({ kind: 'individual', displayName: 'A', nonsense: true });",
        '',
      ].join('\n'),
    );
    execFileSync(
      join(ROOT, 'node_modules/.bin/tsc'),
      [
        '--noEmit',
        '--strict',
        '--target',
        'es2022',
        '--module',
        'nodenext',
        '--moduleResolution',
        'nodenext',
        '--types',
        'node',
        '--typeRoots',
        join(ROOT, 'node_modules/@types'),
        'check.ts',
      ],
      { cwd: scratch, env, encoding: 'utf8' },
    );

    writeFileSync(
      join(scratch, 'run.mjs'),
      [
        "import { TourOps } from '@tourops/sdk';",
        'const api = new TourOps({ token: process.env.TOKEN, baseUrl: process.env.BASE_URL });',
        'const me = await api.me();',
        'const trips = [];',
        'for await (const trip of api.trips.list({ pageSize: 2 })) trips.push(trip.id);',
        'console.log(JSON.stringify({ tenant: me.tenant.id, trips: trips.length }));',
      ].join('\n'),
    );
    // Not synchronous: the server answering it runs in this process.
    const { stdout } = await promisify(execFile)(process.execPath, ['run.mjs'], {
      cwd: scratch,
      env: { ...env, TOKEN: tenant.token, BASE_URL: baseUrl },
      encoding: 'utf8',
      timeout: 30_000,
    });
    assert.deepEqual(JSON.parse(stdout), { tenant: tenant.id, trips: 3 });
  });
});
