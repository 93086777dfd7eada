import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ConfigError, loadConfig, parseDuration, resolveSecretKey } from '../src/config.ts';

describe('configuration', () => {
  it('has the documented defaults', () => {
    const config = loadConfig({});
    assert.equal(config.port, 3000);
    assert.equal(config.host, '127.0.0.1');
    assert.equal(config.databaseUrl, null);
    assert.equal(config.publicBaseUrl, 'http://localhost:3000');
    assert.equal(config.errorsBaseUrl, 'http://localhost:3000/errors');
    assert.equal(config.storefrontBaseUrl, 'http://localhost:3000');
    assert.equal(config.deploymentEnv, 'test');
    assert.equal(config.adminApiToken, null);
    assert.deepEqual(
      config.webhook.retryScheduleMs,
      [60_000, 300_000, 1_800_000, 7_200_000, 43_200_000],
    );
    assert.equal(config.webhook.timeoutMs, 10_000);
    assert.equal(config.webhook.autopauseFailures, 24);
    assert.equal(config.webhook.autopauseWindowMs, 86_400_000);
    assert.equal(config.webhook.keyOverlapMs, 86_400_000);
    assert.equal(config.webhook.allowPrivateTargets, false);
    assert.deepEqual(config.rateLimit, { burstPerSec: 60, perMin: 600, ipPerMin: 2000 });
    assert.equal(config.idempotencyTtlMs, 86_400_000);
    assert.equal(config.logLevel, 'info');
    assert.equal(config.webhook.caFile, null);
    assert.equal(config.smtpUrl, null);
    assert.equal(
      loadConfig({ SMTP_URL: 'smtps://u:p@127.0.0.1:465' }).smtpUrl,
      'smtps://u:p@127.0.0.1:465',
    );
  });

  it('requires SECRET_KEY with PostgreSQL where a process seals or opens secrets', () => {
    const config = loadConfig({ DATABASE_URL: 'postgres://localhost/db' });
    assert.throws(() => resolveSecretKey(config), {
      name: 'ConfigError',
      message: /^SECRET_KEY: required when DATABASE_URL selects PostgreSQL/,
    });
    assert.equal(resolveSecretKey(config, 'if-present'), null);
  });

  it('derives the base URLs from PORT and PUBLIC_BASE_URL', () => {
    assert.equal(loadConfig({ PORT: '8080' }).publicBaseUrl, 'http://localhost:8080');
    const config = loadConfig({ PUBLIC_BASE_URL: 'https://api.example.com/' });
    assert.equal(config.errorsBaseUrl, 'https://api.example.com/errors');
    assert.equal(config.storefrontBaseUrl, 'https://api.example.com');
  });

  it('stops on a bad value with one line naming the variable', () => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ PORT: 'abc' }, /^PORT:/],
      [{ PORT: '70000' }, /^PORT:/],
      [{ DATABASE_URL: 'mysql://x' }, /^DATABASE_URL:/],
      [{ WEBHOOK_RETRY_SCHEDULE: '1m,5x' }, /^WEBHOOK_RETRY_SCHEDULE:/],
      [{ IDEMPOTENCY_TTL: '24' }, /^IDEMPOTENCY_TTL:/],
      [{ DEPLOYMENT_ENV: 'prod' }, /^DEPLOYMENT_ENV:/],
      [{ WEBHOOK_ALLOW_PRIVATE_TARGETS: 'yes' }, /^WEBHOOK_ALLOW_PRIVATE_TARGETS:/],
      [{ RATE_LIMIT_PER_MIN: '-1' }, /^RATE_LIMIT_PER_MIN:/],
      [{ PUBLIC_BASE_URL: 'ftp://x' }, /^PUBLIC_BASE_URL:/],
      [{ LOG_LEVEL: 'loud' }, /^LOG_LEVEL:/],
      [{ REDIS_URL: 'http://x' }, /^REDIS_URL:/],
      [{ WEBHOOK_CA_FILE: '/nonexistent/ca.pem' }, /^WEBHOOK_CA_FILE: cannot read .*ENOENT/],
      [{ WEBHOOK_CA_FILE: fileURLToPath(import.meta.url) }, /^WEBHOOK_CA_FILE: .* no PEM/],
      [{ SMTP_URL: 'notaurl' }, /^SMTP_URL:/],
      [{ SMTP_URL: 'https://mail.example.com' }, /^SMTP_URL:/],
      [{ ADMIN_API_TOKEN: 'a' }, /^ADMIN_API_TOKEN: must be at least 32/],
      [{ ADMIN_API_TOKEN: `${'a'.repeat(31)}` }, /^ADMIN_API_TOKEN:/],
      [{ ADMIN_API_TOKEN: `${'a'.repeat(20)} ${'b'.repeat(20)}` }, /^ADMIN_API_TOKEN:/],
      [{ DATABASE_STATEMENT_TIMEOUT: '5' }, /^DATABASE_STATEMENT_TIMEOUT:/],
      [{ DATABASE_STATEMENT_TIMEOUT: '10ms' }, /^DATABASE_STATEMENT_TIMEOUT:/],
      [{ DATABASE_CONNECT_TIMEOUT: 'soon' }, /^DATABASE_CONNECT_TIMEOUT:/],
      [{ DATABASE_START_WAIT: 'soon' }, /^DATABASE_START_WAIT:/],
      [{ DATABASE_START_WAIT: '2h' }, /^DATABASE_START_WAIT: must be at most 1h/],
      [{ SHUTDOWN_TIMEOUT: '10' }, /^SHUTDOWN_TIMEOUT:/],
    ];
    for (const [env, pattern] of cases) {
      assert.throws(
        () => loadConfig(env),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError);
          assert.match(error.message, pattern);
          assert.ok(!error.message.includes('\n'));
          return true;
        },
      );
    }
  });

  it('takes an admin token of 32 or more characters, and the time-outs with their defaults', () => {
    assert.equal(loadConfig({ ADMIN_API_TOKEN: 'x'.repeat(32) }).adminApiToken, 'x'.repeat(32));
    const config = loadConfig({});
    assert.deepEqual(config.database, {
      statementTimeoutMs: 5_000,
      connectTimeoutMs: 2_000,
      startWaitMs: 60_000,
    });
    assert.equal(loadConfig({ DATABASE_START_WAIT: '0s' }).database.startWaitMs, 0);
    assert.equal(config.shutdownTimeoutMs, 10_000);
    assert.equal(loadConfig({ SHUTDOWN_TIMEOUT: '2s' }).shutdownTimeoutMs, 2_000);
    assert.equal(config.shutdownDrainMs, 0);
    assert.equal(loadConfig({ SHUTDOWN_DRAIN: '3s' }).shutdownDrainMs, 3_000);
    assert.throws(() => loadConfig({ SHUTDOWN_DRAIN: '3' }), /^ConfigError: SHUTDOWN_DRAIN: "3"/);
    assert.deepEqual(config.trustedProxies, []);
    assert.deepEqual(loadConfig({ TRUSTED_PROXIES: '10.0.0.5, fd00::/8' }).trustedProxies, [
      '10.0.0.5',
      'fd00::/8',
    ]);
    for (const bad of ['10.0.0.0/33', 'lb.internal', '10.0.0.5,']) {
      assert.throws(() => loadConfig({ TRUSTED_PROXIES: bad }), /^ConfigError: TRUSTED_PROXIES: /);
    }
  });

  it('parses durations in ms, s, m and h', () => {
    assert.equal(parseDuration('X', '250ms'), 250);
    assert.equal(parseDuration('X', '30s'), 30_000);
    assert.equal(parseDuration('X', '5m'), 300_000);
    assert.equal(parseDuration('X', '2h'), 7_200_000);
  });
});
