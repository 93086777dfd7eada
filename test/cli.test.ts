import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { UsageError } from '../src/cli/args.ts';
import { describeError } from '../src/cli/run.ts';
import { parseExpiry, parseScopes } from '../src/cli/values.ts';
import { ConfigError, describeDatabase, loadConfig } from '../src/config.ts';
import { migrations } from '../src/db/migrate.ts';
import { SCOPES } from '../src/domain/plans.ts';
import { WebhookSubscription } from '../src/http/webhook-schemas.ts';
import type { Clock } from '../src/lib/clock.ts';
import { notFound, validationFailed } from '../src/lib/problems.ts';
import { createRuntime, type Runtime } from '../src/runtime.ts';
import type { AuthContext } from '../src/services/context.ts';
import { AUTH_CACHE_TTL_MS } from '../src/services/index.ts';
import { type CliResult, cliHere, tourops } from './helpers/cli.ts';
import { ManualClock } from './helpers/clock.ts';
import { BACKENDS, createTestDatabase, type TestDatabase } from './helpers/context.ts';
import { emitSample } from './helpers/fixtures.ts';
import { ROOT, startTourops } from './helpers/processes.ts';

/**
 * The real CLI, as an operator runs it: `tourops <args>` (a string is split on spaces) by
 * bin/tourops.js in a child process. Only PATH is inherited, so no DATABASE_URL or DATA_DIR of the
 * developer's shell leaks in.
 */
function assertOk(result: CliResult): void {
  assert.equal(result.code, 0, `exit ${result.code}; stderr: ${result.stderr}`);
}

/** A failure is exactly one `tourops: …` line on stderr and nothing on stdout. */
/** Every line's cells begin where their header's name does (columns two spaces apart or more). */
function assertAligned(text: string, names: string[]): void {
  const [header, ...rows] = text.trimEnd().split('\n');
  const starts = names.map((name) => header.indexOf(name));
  for (const row of rows) {
    for (const start of starts.slice(1)) {
      assert.ok(
        row.slice(start - 2, start) === '  ' && row[start] !== ' ',
        `a column does not begin at ${start}:\n${text}`,
      );
    }
  }
}

function assertFails(result: CliResult, code: 1 | 2, pattern: RegExp): void {
  assert.equal(result.code, code, `stdout: ${result.stdout}\nstderr: ${result.stderr}`);
  assert.equal(result.stdout, '');
  assert.match(result.stderr, /^tourops: [^\n]+\n$/);
  assert.match(result.stderr, pattern);
}

const TOKEN_VALUE = /tk_test_[0-9A-HJKMNP-TV-Z]{26}/;

for (const backend of BACKENDS) {
  describe(`tourops CLI (${backend})`, () => {
    let database: TestDatabase;
    let env: Record<string, string>;
    let runtime: Runtime | undefined;
    let tenantId: string;

    /** Authenticates a token in this process, on the same database the CLI wrote to. */
    /** The in-process "server" the CLI runs beside; its clock moves past the auth cache's TTL. */
    const serverClock = new ManualClock();

    async function authenticate(value: string, clock?: Clock): Promise<AuthContext> {
      const config = loadConfig({ ...database.env, LOG_LEVEL: 'silent' });
      const logger = pino({ level: 'silent' });
      if (clock) {
        const atThatTime = await createRuntime(config, { logger, clock });
        try {
          return await atThatTime.services.tokens.authenticate(`Bearer ${value}`);
        } finally {
          await atThatTime.close();
        }
      }
      runtime ??= await createRuntime(config, { logger, clock: serverClock });
      return runtime.services.tokens.authenticate(`Bearer ${value}`);
    }

    before(async () => {
      database = await createTestDatabase(backend);
      env = { ...database.env, LOG_LEVEL: 'warn' };
    });
    after(async () => {
      await runtime?.close();
      await database.drop();
    });

    it('migrate applies the migrations once, then nothing', async () => {
      const first = await tourops('migrate', env);
      assertOk(first);
      const ids = migrations.map((migration) => migration.id);
      assert.equal(
        first.stdout,
        `Applied ${ids.length} migrations to ${describeDatabase(loadConfig(env))}: ${ids.join(', ')}\n`,
      );

      const second = await tourops('migrate --json', env);
      assertOk(second);
      assert.deepEqual(JSON.parse(second.stdout), { applied: [] });
    });

    it('tenant create prints the tenant; a taken slug is a one-line conflict', async () => {
      const created = await cliHere(
        ['tenant', 'create', '--name', 'Acme Tours', '--slug', 'acme', '--tier', 'pro', '--json'],
        env,
      );
      assertOk(created);
      const tenant = JSON.parse(created.stdout);
      assert.match(tenant.id, /^ten_/);
      assert.equal(tenant.name, 'Acme Tours');
      assert.equal(tenant.slug, 'acme');
      assert.equal(tenant.tier, 'pro');
      assert.equal(tenant.active, true);
      tenantId = tenant.id;

      const again = await cliHere('tenant create --name Other --slug acme --tier starter', env);
      assertFails(again, 1, /slug acme already exists/);
    });

    it('tenant list and token list show what exists, never a token value', async () => {
      const minted = await cliHere('token create --tenant acme --scopes trips:read --json', env);
      assertOk(minted);
      const { token: value, id } = JSON.parse(minted.stdout);
      const tenants = await cliHere('tenant list --json', env);
      assertOk(tenants);
      assert.ok(JSON.parse(tenants.stdout).some((t: { slug: string }) => t.slug === 'acme'));
      const human = await cliHere('tenant list', env);
      assertOk(human);
      assert.match(human.stdout, /^ten_\w+ {2,}acme {2,}pro {2,}Acme Tours$/m);
      assertAligned(human.stdout, ['ID', 'SLUG', 'TIER', 'NAME']);
      const tokens = await cliHere('token list --tenant acme --json', env);
      assertOk(tokens);
      const listed = JSON.parse(tokens.stdout);
      assert.ok(listed.some((t: { id: string }) => t.id === id));
      assert.ok(!tokens.stdout.includes(value), 'the value is never listed');
      const lines = await cliHere('token list --tenant acme', env);
      assertOk(lines);
      assert.match(
        lines.stdout,
        new RegExp(`^${id} {2,}tk_test_\\w+… {2,}active {2,}trips:read$`, 'm'),
      );
      assertAligned(lines.stdout, ['ID', 'PREFIX', 'STATE', 'SCOPES']);
      assertFails(await cliHere('token list --tenant nobody', env), 1, /Tenant "nobody"/);
    });

    it('--json failures are one JSON document on stdout, with the exit code', async () => {
      const missing = await cliHere('token list --tenant nobody --json', env);
      assert.equal(missing.code, 1);
      assert.equal(missing.stderr, '');
      const { error } = JSON.parse(missing.stdout);
      assert.deepEqual({ ...error, message: '' }, { message: '', type: 'not-found', status: 404 });
      // Where it looked: the database this command opened.
      assert.match(
        error.message,
        /^Tenant "nobody" was not found in (SQLite in \/|PostgreSQL at )/,
      );
      const usage = await cliHere('tenant create --json --name X --slug Bad! --tier pro', env);
      assert.equal(usage.code, 2);
      assert.equal(JSON.parse(usage.stdout).error.type, 'usage');
      const unknown = await cliHere('webhook enable whs_01JDZZZZZZZZZZZZZZZZZZZZZZ --json', env);
      assert.equal(unknown.code, 1);
      assert.equal(JSON.parse(unknown.stdout).error.type, 'not-found');
      // The plural spelling of earlier versions still works.
      const alias = await cliHere('webhooks enable whs_01JDZZZZZZZZZZZZZZZZZZZZZZ', env);
      assertFails(alias, 1, /Webhook subscription "whs_01JDZZZZZZZZZZZZZZZZZZZZZZ"/);
    });

    it('--json prints every boolean of an API object as a JSON boolean', async () => {
      const config = loadConfig({ ...env, WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' });
      const here = await createRuntime(config, { logger: pino({ level: 'silent' }) });
      let id: string;
      try {
        const { subscription } = await here.services.webhooks.create(tenantId, {
          url: 'https://127.0.0.1:9/cli-json',
          events: ['client.created'],
          standardWebhooks: true,
          asymmetricSignatures: true,
        });
        id = subscription.id;
        await here.services.webhooks.update(tenantId, id, { active: false });
      } finally {
        await here.close();
      }
      const enabled = await cliHere(['webhook', 'enable', id, '--json'], env);
      assertOk(enabled);
      const printed = JSON.parse(enabled.stdout) as Record<string, unknown>;
      const booleans = Object.entries(WebhookSubscription.properties)
        .filter(([, schema]) => (schema as { type?: unknown }).type === 'boolean')
        .map(([name]) => name);
      assert.ok(booleans.includes('asymmetricSignatures'), booleans.join());
      for (const name of booleans) {
        assert.equal(typeof printed[name], 'boolean', `${name}: ${JSON.stringify(printed[name])}`);
      }
      assert.equal(printed.asymmetricSignatures, true);
    });

    it("webhook list shows a tenant's subscriptions with their payload filters", async () => {
      const config = loadConfig({ ...env, WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' });
      const here = await createRuntime(config, { logger: pino({ level: 'silent' }) });
      const filter = { 'data.kind': 'company', $or: [{ 'data.displayName': { $prefix: 'A' } }] };
      let id: string;
      try {
        const { subscription } = await here.services.webhooks.create(tenantId, {
          url: 'https://127.0.0.1:9/cli-filter',
          events: ['client.created'],
          filter,
        });
        id = subscription.id;
      } finally {
        await here.close();
      }
      const plain = await cliHere(['webhook', 'list', '--tenant', tenantId], env);
      assertOk(plain);
      const [head, ...lines] = plain.stdout.trimEnd().split('\n');
      assert.match(head, /^ID\s+STATE\s+URL\s+EVENTS\s+FILTER\s+TRANSFORM\s+RETRIES$/);
      const line = lines.find((l) => l.startsWith(id));
      assert.ok(line, plain.stdout);
      assert.ok(line.includes(JSON.stringify(filter)), line);
      assert.match(line, /\s-\s+default$/, 'no transformation, the default schedule');
      const json = await cliHere(['webhook', 'list', '--tenant', tenantId, '--json'], env);
      assertOk(json);
      const listed = (JSON.parse(json.stdout) as Array<{ id: string; filter: unknown }>).find(
        (s) => s.id === id,
      );
      assert.deepEqual(listed?.filter, filter);
      const missing = await cliHere('webhook list --tenant nobody', env);
      assertFails(missing, 1, /Tenant "nobody" was not found/);
    });

    it("webhook transformation dry-runs code over a subscription's ledger", async () => {
      const config = loadConfig({ ...env, WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' });
      const here = await createRuntime(config, { logger: pino({ level: 'silent' }) });
      let id: string;
      try {
        const { subscription } = await here.services.webhooks.create(tenantId, {
          url: 'https://127.0.0.1:9/cli-transform',
          events: ['client.created'],
          retrySchedule: ['30s', '5m'],
        });
        id = subscription.id;
        await emitSample(here, tenantId, 'client.created');
      } finally {
        await here.close();
      }
      const dir = mkdtempSync(join(tmpdir(), 'cli-transform-'));
      const code = join(dir, 'handler.js');
      writeFileSync(
        code,
        'function handler(webhook) {\n  webhook.payload = { text: webhook.type };\n  return webhook;\n}\n',
      );
      const broken = join(dir, 'broken.js');
      writeFileSync(broken, 'function handler(webhook) {\n  return webhook +;\n}\n');
      try {
        const plain = await cliHere(['webhook', 'transformation', id, '--code', code], env);
        assertOk(plain);
        assert.match(
          plain.stdout,
          /^SEQ\s+TYPE\s+SENDS\n1\s+client\.created\s+https:\/\/127\.0\.0\.1:9\/cli-transform \{"text":"client\.created"\}\n$/,
        );
        const json = await cliHere(
          ['webhook', 'transformation', id, '--code', code, '--json'],
          env,
        );
        assertOk(json);
        const [event] = JSON.parse(json.stdout).events;
        assert.deepEqual(event.result.payload, { text: 'client.created' });
        const refused = await cliHere(['webhook', 'transformation', id, '--code', broken], env);
        assertFails(refused, 1, /code: SyntaxError.*\(line 2\)/);
        const listed = await cliHere(['webhook', 'list', '--tenant', tenantId], env);
        assert.match(listed.stdout, new RegExp(`${id}.*\\s-\\s+30s,5m\\n`));
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('tenant create rejects an unknown tier and a bad slug as usage errors', async () => {
      const [tier, slug] = await Promise.all([
        cliHere('tenant create --name X --slug x --tier gold', env),
        cliHere('tenant create --name X --slug Not_a_slug --tier pro', env),
      ]);
      assertFails(tier, 2, /--tier must be one of free, starter, pro, enterprise/);
      assertFails(slug, 2, /--slug "Not_a_slug"/);
      // Every bad flag in one answer, and every missing one.
      const [both, missing] = await Promise.all([
        cliHere('tenant create --name X --slug Not_a_slug --tier gold', env),
        cliHere('tenant create --name X', env),
      ]);
      assertFails(both, 2, /--slug "Not_a_slug" must be .*; --tier must be one of/);
      assertFails(missing, 2, /--slug, --tier are required/);
    });

    it('token create by tenant id mints a token that authenticates with its scopes', async () => {
      const result = await cliHere(
        ['token', 'create', '--tenant', tenantId, '--scopes', 'trips:read, clients:read', '--json'],
        env,
      );
      assertOk(result);
      const body = JSON.parse(result.stdout);
      assert.match(body.token, TOKEN_VALUE);
      assert.match(body.id, /^tok_/);
      assert.equal(body.prefix, body.token.slice(0, 12));
      assert.deepEqual(body.scopes, ['trips:read', 'clients:read']);
      assert.equal(body.expiresAt, null);
      assert.equal(body.revoked, false);

      const auth = await authenticate(body.token);
      assert.equal(auth.tenant.id, tenantId);
      assert.equal(auth.token.id, body.id);
      assert.deepEqual([...auth.scopes].sort(), ['clients:read', 'trips:read']);
    });

    it('token create by slug with --scopes all, --expires and --name (human output)', async () => {
      const result = await cliHere(
        [
          ...'token create --tenant acme --scopes all --expires 2099-01-31'.split(' '),
          '--name',
          'booking sync',
        ],
        env,
      );
      assertOk(result);
      const value = TOKEN_VALUE.exec(result.stdout)?.[0];
      assert.ok(value, result.stdout);
      assert.match(result.stdout, /expires: 2099-01-31T00:00:00\.000Z/);
      assert.match(result.stdout, /shown only now/);

      const auth = await authenticate(value);
      assert.equal(auth.tenant.id, tenantId);
      assert.deepEqual([...auth.scopes].sort(), [...SCOPES].sort());
      assert.equal(auth.token.name, 'booking sync');
      assert.equal(auth.token.expiresAt, '2099-01-31T00:00:00.000Z');
      // Past its expiry the same token is refused.
      const later: Clock = { now: () => new Date('2099-02-01T00:00:00Z') };
      await assert.rejects(authenticate(value, later), /expired/);
    });

    it('token create takes a date-time with an offset and stores it in UTC', async () => {
      const result = await cliHere(
        'token create --tenant acme --scopes bookings:read --expires 2099-06-30T12:00:00+02:00 --json',
        env,
      );
      assertOk(result);
      assert.equal(JSON.parse(result.stdout).expiresAt, '2099-06-30T10:00:00.000Z');
    });

    it('token create: bad option values exit 2, an unknown tenant exits 1', async () => {
      const [scope, expires, missing, tenant] = await Promise.all([
        cliHere('token create --tenant acme --scopes trips:read,trips:fly', env),
        cliHere('token create --tenant acme --scopes all --expires soon', env),
        cliHere('token create --tenant acme', env),
        cliHere('token create --tenant nobody --scopes all', env),
      ]);
      assertFails(scope, 2, /unknown scope "trips:fly"/);
      assertFails(expires, 2, /--expires "soon"/);
      assertFails(missing, 2, /--scopes is required/);
      assertFails(tenant, 1, /Tenant "nobody" was not found/);
    });

    it('token revoke revokes, after which the token no longer authenticates', async () => {
      const minted = await cliHere('token create --tenant acme --scopes trips:read --json', env);
      assertOk(minted);
      const { id, token } = JSON.parse(minted.stdout);
      await authenticate(token);

      const revoked = await cliHere(['token', 'revoke', id, '--json'], env);
      assertOk(revoked);
      const body = JSON.parse(revoked.stdout);
      assert.equal(body.id, id);
      assert.equal(body.revoked, true);
      assert.equal('token' in body, false);
      // Another process revoked it: a running process sees that within the auth cache's TTL.
      serverClock.advance(AUTH_CACHE_TTL_MS);
      await assert.rejects(authenticate(token), /revoked/);

      const unknown = await cliHere('token revoke tok_nope', env);
      assertFails(unknown, 1, /Token "tok_nope" was not found/);
    });

    it('demo seeds the demo tenant once; a second run fails with exit 1', async () => {
      const first = await cliHere('demo --json', env);
      assertOk(first);
      const demo = JSON.parse(first.stdout);
      assert.deepEqual(Object.keys(demo).sort(), ['tenantId', 'tenantSlug', 'token']);
      assert.equal(demo.tenantSlug, 'demo');
      const auth = await authenticate(demo.token);
      assert.equal(auth.tenant.id, demo.tenantId);
      assert.equal(auth.scopes.size, SCOPES.length);

      const second = await cliHere('demo', env);
      assertFails(second, 1, /slug demo already exists/);
    });
  });
}

/** What does not depend on the database backend runs once, on SQLite. */
describe('tourops CLI (command line)', () => {
  let database: TestDatabase;

  before(async () => {
    database = await createTestDatabase('sqlite');
  });
  after(() => database.drop());

  it('--help on the top level and on every command exits 0 and lists the options', async () => {
    const [top, tenant, token, revoke, serve, group] = await Promise.all([
      tourops('--help', {}),
      tourops('tenant create --help', {}),
      tourops('token create -h', {}),
      tourops('token revoke --help', {}),
      tourops('serve --help', {}),
      tourops('token --help', {}),
    ]);
    for (const result of [top, tenant, token, revoke, serve, group]) assertOk(result);
    const commands = [
      'serve',
      'worker',
      'migrate',
      'demo',
      'tenant create',
      'token create',
      'token revoke',
      'webhooks enable',
    ];
    for (const command of commands) assert.match(top.stdout, new RegExp(`^  ${command}\\b`, 'm'));
    for (const option of ['--name', '--slug', '--tier', '--json', '--help']) {
      assert.ok(tenant.stdout.includes(option), `tenant create --help lacks ${option}`);
    }
    for (const option of ['--tenant', '--scopes', '--expires', '--name', '--json']) {
      assert.ok(token.stdout.includes(option), `token create --help lacks ${option}`);
    }
    assert.match(revoke.stdout, /<id>/);
    assert.match(serve.stdout, /--no-worker/);
    assert.match(group.stdout, /tourops token create/);
    assert.match(group.stdout, /tourops token revoke/);
  });

  it('--version prints the version, as text or JSON', async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    const text = await tourops('--version', {});
    assertOk(text);
    assert.equal(text.stdout, `tourops ${version}\n`);
    const json = await tourops('--version --json', {});
    assertOk(json);
    assert.deepEqual(JSON.parse(json.stdout), { version });
  });

  it('an unknown command, a missing command and an unknown option exit 2 with one line', async () => {
    const [unknown, none, sub, option, json] = await Promise.all([
      tourops('frobnicate', {}),
      tourops('', {}),
      tourops('token frob', {}),
      tourops('migrate --verbose', {}),
      tourops('serve --json', {}),
    ]);
    assertFails(unknown, 2, /unknown command "frobnicate"/);
    assertFails(none, 2, /missing command/);
    assertFails(sub, 2, /unknown command "token frob"/);
    assertFails(option, 2, /unknown option --verbose/);
    assertFails(json, 2, /--json is not available for serve/);
  });

  it('a command on a DATA_DIR holding no database says so, and leaves nothing there', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'tourops-no-db-'));
    const missing = join(empty, 'data');
    try {
      for (const command of [
        'tenant list',
        'token list --tenant demo',
        'webhook list --tenant demo',
        'listen --tenant demo --forward-to http://127.0.0.1:9/hook',
      ]) {
        const result = await tourops(command, { DATA_DIR: missing });
        assertFails(
          result,
          1,
          /^tourops: DATA_DIR: there is no database at .*tourops\.sqlite; set DATA_DIR to the server's/,
        );
        assert.equal(existsSync(missing), false, `${command} made ${missing}`);
      }
      // A first tenant may make one.
      assertOk(
        await tourops('tenant create --name Sol --slug sol --tier pro', { DATA_DIR: missing }),
      );
      assert.equal(existsSync(join(missing, 'tourops.sqlite')), true);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });

  it('a bad environment variable stops with one line naming it, exit 1', async () => {
    const result = await tourops('migrate', { ...database.env, PORT: 'abc' });
    assertFails(result, 1, /^tourops: PORT: "abc"/);
  });

  it('demo prints the token and a ready curl line', async () => {
    const result = await tourops('demo', {
      ...database.env,
      PUBLIC_BASE_URL: 'http://api.example.test',
    });
    assertOk(result);
    const token = TOKEN_VALUE.exec(result.stdout)?.[0];
    assert.ok(token, result.stdout);
    const curl = `curl -s -H "Authorization: Bearer ${token}" http://api.example.test/api/v1/trips?limit=2`;
    assert.ok(result.stdout.includes(curl), result.stdout);
  });

  it('serve --no-worker serves the API until SIGTERM, then exits 0', async () => {
    const server = await startTourops(['serve', '--no-worker'], database.env);
    try {
      const response = await fetch(`${server.baseUrl}/healthz`);
      assert.equal(response.status, 200);
      assert.deepEqual(await response.json(), { status: 'ok' });
    } finally {
      assert.equal(await server.stop(), 0, server.output());
    }
  });

  it('worker runs until SIGTERM, then exits 0', async () => {
    const worker = await startTourops(['worker'], database.env, 'Webhook delivery worker running');
    assert.equal(await worker.stop(), 0, worker.output());
  });
});

/** The pieces behind those lines, in process (no spawn needed). */
describe('tourops CLI (messages and values)', () => {
  it('a domain problem is its detail, with field errors the detail does not already say', () => {
    assert.equal(describeError(notFound('Tenant "x"')), 'Tenant "x" was not found.');
    assert.equal(
      describeError(validationFailed({ scopes: ['unknown scope: x'] })),
      'scopes: unknown scope: x',
    );
    assert.equal(
      describeError(validationFailed({ name: ['is too long'], slug: ['is taken', 'is odd'] })),
      '2 fields failed validation. (name: is too long; slug: is taken; slug: is odd)',
    );
    assert.equal(
      describeError(new ConfigError('PORT: "abc" is not an integer between 0 and 65535')),
      'PORT: "abc" is not an integer between 0 and 65535',
    );
    assert.equal(
      describeError(new UsageError('--tenant is required', 'token create')),
      '--tenant is required (see: tourops token create --help)',
    );
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), {
      code: 'ECONNREFUSED',
    });
    assert.equal(
      describeError(new AggregateError([refused])),
      'DATABASE_URL: cannot reach the database (connect ECONNREFUSED 127.0.0.1:1)',
    );
    assert.equal(describeError(new Error('two\nlines')), 'two lines');
  });

  it('--expires takes ISO dates and zoned date-times in the future, nothing else', () => {
    const now = new Date('2030-01-01T00:00:00Z');
    const parse = (raw: string) => parseExpiry(raw, now, 'token create');
    assert.equal(parse('2030-02-28'), '2030-02-28T00:00:00.000Z');
    assert.equal(parse('2030-01-01T10:30Z'), '2030-01-01T10:30:00.000Z');
    assert.equal(parse('2030-01-01T10:30:15.5-05:00'), '2030-01-01T15:30:15.500Z');
    for (const bad of ['2030-02-30', '2030-13-01', '2030-01-01T24:00:00Z', 'tomorrow', '']) {
      assert.throws(() => parse(bad), /is not an ISO date/, bad);
    }
    assert.throws(() => parse('2030-06-01T10:00'), /needs a time zone/);
    assert.throws(() => parse('2029-12-31'), /not in the future/);
  });

  it('--scopes takes a comma list, or * as the API does (all as an alias)', () => {
    assert.deepEqual(parseScopes('*', 'token create'), ['*']);
    assert.deepEqual(parseScopes('all', 'token create'), ['*']);
    assert.deepEqual(parseScopes(' trips:read,,trips:read ', 'token create'), ['trips:read']);
    assert.throws(() => parseScopes('trips:fly', 'token create'), /unknown scope "trips:fly"/);
    assert.throws(() => parseScopes(',', 'token create'), /at least one scope/);
  });
});
