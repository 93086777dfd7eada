import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe } from 'node:test';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import pg from 'pg';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import { createDatabase } from '../../src/db/database.ts';
import { migrate, migrations } from '../../src/db/migrate.ts';
import type { Resolver } from '../../src/domain/address-guard.ts';
import type { Clock } from '../../src/lib/clock.ts';
import { createHttpApp, createRuntime, type Runtime } from '../../src/runtime.ts';
import { testCa } from './https-receiver.ts';
import { OpenApiResponseValidator } from './openapi-validator.ts';

export type Backend = 'sqlite' | 'postgres';

/** SQLite always; PostgreSQL too when TEST_DATABASE_URL points at a server. */
export const BACKENDS: Backend[] = process.env.TEST_DATABASE_URL
  ? ['sqlite', 'postgres']
  : ['sqlite'];

/**
 * A suite per backend, the backends' suites side by side (each one's tests in order), so that a
 * file whose tests mostly wait (a Retry-After, a rate cap, a time-out) takes one backend's time,
 * not the sum. Only for suites that share nothing in their process but the machine.
 */
export function describeEachBackend(title: string, body: (backend: Backend) => void): void {
  describe(title, { concurrency: true }, () => {
    for (const backend of BACKENDS) describe(backend, { concurrency: 1 }, () => body(backend));
  });
}

export const ADMIN_TOKEN = 'admin-test-token-0123456789abcdefghijkl';

export interface TestDatabase {
  env: Record<string, string>;
  drop(): Promise<void>;
}

/**
 * A migrated database to copy on the PostgreSQL server, one per set of migrations: made once (by
 * whichever test process comes first, under an advisory lock), then CREATE DATABASE … TEMPLATE
 * copies it at the cost of a file copy instead of running every migration again.
 */
async function migratedTemplate(admin: pg.Client, base: string): Promise<string> {
  const digest = createHash('sha256');
  for (const migration of migrations) digest.update(`${migration.id}\n${migration.up}\n`);
  const name = `tourops_template_${digest.digest('hex').slice(0, 16)}`;
  const exists = async () =>
    (await admin.query('select 1 from pg_database where datname = $1', [name])).rowCount === 1;
  if (await exists()) return name;
  await admin.query('select pg_advisory_lock(hashtext($1))', [name]);
  try {
    if (await exists()) return name;
    // Built under another name and renamed when complete: a half-made template is never copied.
    const building = `${name}_building`;
    await admin.query(`drop database if exists ${building} with (force)`);
    await admin.query(`create database ${building}`);
    const url = new URL(base);
    url.pathname = `/${building}`;
    const database = createDatabase({
      databaseUrl: url.toString(),
      dataDir: tmpdir(),
      poolSize: 1,
    });
    try {
      await migrate(database);
    } finally {
      await database.close();
    }
    await admin.query(`alter database ${building} rename to ${name}`);
    return name;
  } finally {
    await admin.query('select pg_advisory_unlock(hashtext($1))', [name]);
  }
}

/**
 * A fresh database: a temp directory for SQLite, a new database on the PostgreSQL server. Empty,
 * or with `migrated` (PostgreSQL) already migrated, copied from migratedTemplate.
 */
export async function createTestDatabase(
  backend: Backend,
  options: { migrated?: boolean } = {},
): Promise<TestDatabase> {
  if (backend === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'tourops-test-'));
    return {
      env: { DATA_DIR: dir },
      drop: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const base = process.env.TEST_DATABASE_URL as string;
  const name = `tourops_test_${Date.now()}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  try {
    const template = options.migrated ? ` template ${await migratedTemplate(admin, base)}` : '';
    // Concurrent CREATE DATABASE (suites run in parallel) can find the template busy: retry that.
    for (let attempt = 1; ; attempt++) {
      try {
        await admin.query(`create database ${name}${template}`);
        break;
      } catch (error) {
        if ((error as { code?: string }).code !== '55006' || attempt === 20) throw error;
        await new Promise((resolve) => setTimeout(resolve, 50 * attempt));
      }
    }
  } finally {
    await admin.end();
  }
  const url = new URL(base);
  url.pathname = `/${name}`;
  const dir = mkdtempSync(join(tmpdir(), 'tourops-test-'));
  return {
    env: {
      DATABASE_URL: url.toString(),
      DATA_DIR: dir,
      SECRET_KEY: randomBytes(32).toString('hex'),
    },
    drop: async () => {
      const client = new pg.Client({ connectionString: base });
      await client.connect();
      await client.query(`drop database if exists ${name} with (force)`);
      await client.end();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

interface ApiRequest {
  token?: string;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface TestContext {
  backend: Backend;
  /** The database's and the options' environment: a child `tourops` process on the same data. */
  env: Record<string, string>;
  runtime: Runtime;
  app: FastifyInstance;
  /** Every public-API response has been checked against the OpenAPI document. */
  api(
    method: InjectOptions['method'],
    url: string,
    request?: ApiRequest,
  ): Promise<LightMyRequestResponse>;
  /** The raw admin answer, for tests that expect a failure. */
  adminRequest(
    method: InjectOptions['method'],
    url: string,
    body?: unknown,
    token?: string,
  ): Promise<LightMyRequestResponse>;
  /** An admin call that must succeed; its parsed body. */
  admin<T = Record<string, unknown>>(
    method: InjectOptions['method'],
    url: string,
    body?: unknown,
  ): Promise<T>;
  close(): Promise<void>;
}

/** Validators by document text: compiling one costs more than the rest of a context. */
const validators = new Map<string, OpenApiResponseValidator>();
function responseValidator(documentText: string): OpenApiResponseValidator {
  let validator = validators.get(documentText);
  if (!validator) {
    validator = new OpenApiResponseValidator(JSON.parse(documentText));
    validators.set(documentText, validator);
  }
  return validator;
}

export async function createTestContext(
  backend: Backend,
  options: {
    clock?: Clock;
    env?: Record<string, string>;
    resolver?: Resolver;
    /** Where the app and the worker log (default: silent, or TEST_LOG_LEVEL). */
    logger?: pino.Logger;
  } = {},
): Promise<TestContext> {
  const database = await createTestDatabase(backend, { migrated: true });
  const config = loadConfig({
    ADMIN_API_TOKEN: ADMIN_TOKEN,
    LOG_LEVEL: 'silent',
    // Suites about other things make hundreds of requests a second with one token; the
    // rate-limit suite sets its own limits.
    RATE_LIMIT_BURST_PER_SEC: '1000000',
    RATE_LIMIT_PER_MIN: '100000000',
    RATE_LIMIT_IP_PER_MIN: '100000000',
    PUBLIC_BASE_URL: 'http://api.test',
    ...database.env,
    ...options.env,
  });
  const logger = options.logger ?? pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const runtime = await createRuntime(config, {
    clock: options.clock,
    logger,
    listen: true,
    resolver: options.resolver,
  });
  const app = await createHttpApp(runtime, logger);
  await app.ready();
  const documentText = (await app.inject({ method: 'GET', url: '/v1/openapi.json' })).body;
  const validator = responseValidator(documentText);

  const api: TestContext['api'] = async (method, url, request = {}) => {
    const headers: Record<string, string> = { ...request.headers };
    if (request.token) headers.authorization = `Bearer ${request.token}`;
    const response = await app.inject({
      method,
      url,
      headers,
      ...(request.body === undefined
        ? {}
        : typeof request.body === 'string'
          ? { payload: request.body }
          : {
              payload: JSON.stringify(request.body),
              headers: { 'content-type': 'application/json', ...headers },
            }),
    });
    if (url.startsWith('/api/v1/')) {
      const problems = validator.check(
        String(method),
        url,
        response.statusCode,
        response.headers['content-type'] as string | undefined,
        response.body,
        response.headers,
      );
      if (problems.length > 0) {
        throw new Error(
          `response does not match the OpenAPI document:\n${problems.join('\n')}\nbody: ${response.body}`,
        );
      }
    }
    return response;
  };

  const adminRequest: TestContext['adminRequest'] = (method, url, body, token = ADMIN_TOKEN) =>
    app.inject({
      method,
      url,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
    });

  const admin: TestContext['admin'] = async (method, url, body) => {
    const response = await adminRequest(method, url, body);
    if (response.statusCode >= 300) {
      throw new Error(`admin ${method} ${url} answered ${response.statusCode}: ${response.body}`);
    }
    return response.json();
  };

  return {
    backend,
    env: { ADMIN_API_TOKEN: ADMIN_TOKEN, ...database.env, ...options.env },
    runtime,
    app,
    api,
    adminRequest,
    admin,
    close: async () => {
      await app.close();
      await runtime.close();
      await database.drop();
    },
  };
}

/**
 * A test context whose webhooks reach the test receivers: private (loopback) targets allowed and
 * the test CA trusted; `env` adds to that.
 */
export async function createWebhookTestContext(
  backend: Backend,
  env: Record<string, string> = {},
  options: Omit<Parameters<typeof createTestContext>[1] & object, 'env'> = {},
): Promise<TestContext> {
  const ca = await testCa();
  return createTestContext(backend, {
    ...options,
    env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', WEBHOOK_CA_FILE: ca.caFile, ...env },
  });
}
