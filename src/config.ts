import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { join, resolve } from 'node:path';
import ipaddr from 'ipaddr.js';
import leven from 'leven';
import { durationMs } from './domain/durations.ts';
import { makePrivateDirectory } from './lib/private-dir.ts';

export type DeploymentEnv = 'live' | 'test';

export interface Config {
  port: number;
  host: string;
  databaseUrl: string | null;
  database: {
    /** Longest a statement may run (PostgreSQL statement_timeout; SQLite's wait for the lock). */
    statementTimeoutMs: number;
    /** Longest to wait for a connection (PostgreSQL). */
    connectTimeoutMs: number;
    /**
     * DATABASE_START_WAIT: how long a serving process or worker started while its database does
     * not answer keeps trying before it exits (0: at once).
     */
    startWaitMs: number;
  };
  dataDir: string;
  redisUrl: string | null;
  publicBaseUrl: string;
  errorsBaseUrl: string;
  storefrontBaseUrl: string;
  deploymentEnv: DeploymentEnv;
  adminApiToken: string | null;
  /** Raw SECRET_KEY; resolved (generated into DATA_DIR when embedded) by `resolveSecretKey`. */
  secretKey: string | null;
  webhook: {
    retryScheduleMs: number[];
    timeoutMs: number;
    autopauseFailures: number;
    autopauseWindowMs: number;
    keyOverlapMs: number;
    /**
     * Only for claims made by a version before the worker registry (no `claimed_by`): how long
     * past the attempt time-out they are held before other workers take them over. Every newer
     * claim is taken over once its worker's heartbeat is workerDeadAfterMs old.
     */
    leaseGraceMs: number;
    /**
     * WEBHOOK_WORKER_DEAD_AFTER: a worker silent this long is dead and any worker takes over its
     * claims; it beats five times within it (see WorkerRegistry).
     */
    workerDeadAfterMs: number;
    allowPrivateTargets: boolean;
    caFile: string | null;
    /** Longest a webhook host name's resolution may take, at registration and at connect. */
    dnsTimeoutMs: number;
  };
  rateLimit: { burstPerSec: number; perMin: number; ipPerMin: number };
  idempotencyTtlMs: number;
  logLevel: string;
  smtpUrl: string | null;
  metrics: {
    /** Bearer token guarding GET /metrics; null: served only when HOST is a loopback address. */
    token: string | null;
    /** Port of a separate `tourops worker`'s /metrics; null: none. */
    workerPort: number | null;
  };
  /**
   * TRUSTED_PROXIES: peers (addresses or CIDR ranges) whose X-Forwarded-For names the client, as
   * a load balancer in front of the API nodes; empty: the peer is the client.
   */
  trustedProxies: string[];
  /** Bound on a graceful stop: what is still running then is cut off. */
  shutdownTimeoutMs: number;
  /**
   * SHUTDOWN_DRAIN: after the signal, how long a serving process still accepts and answers while
   * /readyz says `draining`, so that a load balancer stops sending before the listener closes.
   */
  shutdownDrainMs: number;
  /** RETENTION_DAYS: settled deliveries, unneeded events and notifications older are purged; 0 keeps all. */
  retentionDays: number;
}

/** A bad environment variable: start-up stops with this one line. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Env = Record<string, string | undefined>;

/**
 * Every environment variable the service reads (config.ts reads only these: its getter takes this
 * type), and the standard OpenTelemetry ones it sets or looks at.
 */
export const KNOWN_VARIABLES = [
  'PORT',
  'HOST',
  'DATABASE_URL',
  'DATABASE_STATEMENT_TIMEOUT',
  'DATABASE_CONNECT_TIMEOUT',
  'DATABASE_START_WAIT',
  'DATA_DIR',
  'REDIS_URL',
  'PUBLIC_BASE_URL',
  'ERRORS_BASE_URL',
  'STOREFRONT_BASE_URL',
  'DEPLOYMENT_ENV',
  'ADMIN_API_TOKEN',
  'SECRET_KEY',
  'WEBHOOK_RETRY_SCHEDULE',
  'WEBHOOK_TIMEOUT_MS',
  'WEBHOOK_AUTOPAUSE_FAILURES',
  'WEBHOOK_AUTOPAUSE_WINDOW',
  'WEBHOOK_KEY_OVERLAP',
  'WEBHOOK_LEASE_GRACE',
  'WEBHOOK_WORKER_DEAD_AFTER',
  'WEBHOOK_ALLOW_PRIVATE_TARGETS',
  'WEBHOOK_CA_FILE',
  'WEBHOOK_DNS_TIMEOUT',
  'RATE_LIMIT_BURST_PER_SEC',
  'RATE_LIMIT_PER_MIN',
  'RATE_LIMIT_IP_PER_MIN',
  'IDEMPOTENCY_TTL',
  'LOG_LEVEL',
  'SMTP_URL',
  'METRICS_TOKEN',
  'WORKER_METRICS_PORT',
  'SHUTDOWN_TIMEOUT',
  'SHUTDOWN_DRAIN',
  'TRUSTED_PROXIES',
  'RETENTION_DAYS',
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  'OTEL_EXPORTER_OTLP_PROTOCOL',
  'OTEL_SERVICE_NAME',
  'OTEL_METRICS_EXPORTER',
  'OTEL_LOGS_EXPORTER',
] as const;
type KnownVariable = (typeof KNOWN_VARIABLES)[number];

/** A variable that is only ever ours: anything else under these is a mistake. */
const OUR_PREFIXES = [
  'WEBHOOK_',
  'RATE_LIMIT_',
  'DATABASE_',
  'RETENTION_',
  'PORTAL_',
  'SMTP_',
  'METRICS_',
];

const known: ReadonlySet<string> = new Set(KNOWN_VARIABLES);

/**
 * Names platforms inject into every process, never meant for us: Kubernetes service links
 * (`<NAME>_SERVICE_HOST`, `<NAME>_SERVICE_PORT[_<port name>]`, `<NAME>_PORT`,
 * `<NAME>_PORT_<n>_<TCP|UDP|SCTP>[_PROTO|_PORT|_ADDR]`), Nomad's `PORT0`…, and `HOSTS`. A bare
 * `<NAME>_PORT` is a service link only with a link's value (`tcp://10.0.0.1:5432`): a typo of
 * WORKER_METRICS_PORT with a port number is still named.
 */
function injectedByPlatform(name: string, value: string | undefined): boolean {
  return (
    /^[A-Z0-9_]+_SERVICE_(HOST|PORT(_[A-Z0-9_]+)?)$/.test(name) ||
    /^[A-Z0-9_]+_PORT_\d+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?$/.test(name) ||
    /^PORT\d+$/.test(name) ||
    name === 'HOSTS' ||
    (/^[A-Z0-9_]+_PORT$/.test(name) && /^(tcp|udp|sctp):\/\//.test(value ?? ''))
  );
}

export interface MisspeltVariable {
  name: string;
  /** The known name closest to it. */
  nearest: KnownVariable;
}

/** What a command says of a misspelt variable (a log line, or a warning on stderr). */
export function misspeltMessage({ name, nearest }: MisspeltVariable): string {
  return `${name} is not a variable this service reads: did you mean ${nearest}?`;
}

/**
 * Variables that look meant for us but are not one of our names: within edit distance 2 of one
 * (1 for names under 8 characters, so `HOME` is never taken for `HOST`), or under one of our
 * prefixes. Compared in upper case, so `database_url` is caught too. Names a platform injects
 * (see injectedByPlatform) are never flagged.
 */
export function misspeltVariables(env: Env): MisspeltVariable[] {
  const found: MisspeltVariable[] = [];
  for (const name of Object.keys(env)) {
    if (known.has(name) || injectedByPlatform(name, env[name])) continue;
    const upper = name.toUpperCase();
    let nearest: KnownVariable = KNOWN_VARIABLES[0];
    let nearestDistance = Number.POSITIVE_INFINITY;
    let close = false;
    for (const candidate of KNOWN_VARIABLES) {
      const distance = leven(upper, candidate);
      if (distance < nearestDistance) {
        nearest = candidate;
        nearestDistance = distance;
      }
      if (distance <= (candidate.length < 8 ? 1 : 2)) close = true;
    }
    if (close || OUR_PREFIXES.some((prefix) => upper.startsWith(prefix))) {
      found.push({ name, nearest });
    }
  }
  return found;
}

export function parseDuration(name: string, value: string): number {
  const ms = durationMs(value);
  if (ms === null) {
    throw new ConfigError(
      `${name}: "${value}" is not a duration (a whole number followed by ms, s, m or h, e.g. 30s)`,
    );
  }
  return ms;
}

function parsePositiveDuration(name: string, value: string): number {
  const ms = parseDuration(name, value);
  if (ms === 0) throw new ConfigError(`${name}: "${value}" must be more than 0`);
  return ms;
}

function parseMinDuration(name: string, value: string, minMs: number): number {
  const ms = parseDuration(name, value);
  if (ms < minMs) throw new ConfigError(`${name}: "${value}" must be at least ${minMs} ms`);
  return ms;
}

function parseInteger(name: string, value: string, min: number, max: number): number {
  if (!/^\d+$/.test(value.trim()) || Number(value) < min || Number(value) > max) {
    throw new ConfigError(`${name}: "${value}" is not an integer between ${min} and ${max}`);
  }
  return Number(value);
}

function parseBoolean(name: string, value: string): boolean {
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  throw new ConfigError(`${name}: "${value}" is not a boolean (true or false)`);
}

function parseHttpUrl(name: string, value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(`${name}: "${value}" is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError(`${name}: "${value}" must be an http or https URL`);
  }
  return value.replace(/\/+$/, '');
}

function parseSmtpUrl(name: string, value: string): string {
  if (!URL.canParse(value) || !['smtp:', 'smtps:'].includes(new URL(value).protocol)) {
    throw new ConfigError(`${name}: "${value}" is not an smtp:// or smtps:// URL`);
  }
  return value;
}

/** Comma-separated IP addresses and CIDR ranges (ipaddr.js judges the ranges). */
function parseTrustedProxies(name: string, value: string): string[] {
  const entries = value.split(',').map((entry) => entry.trim());
  for (const entry of entries) {
    if (entry.includes('/') ? !ipaddr.isValidCIDR(entry) : isIP(entry) === 0) {
      throw new ConfigError(
        `${name}: "${entry}" is not an IP address or a CIDR range (e.g. 10.0.0.0/24)`,
      );
    }
  }
  return entries;
}

/** Read now, so a wrong path stops start-up naming the variable, not at the first delivery. */
function parseCaFile(name: string, value: string): string {
  let pem: string;
  try {
    pem = readFileSync(value, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new ConfigError(`${name}: cannot read "${value}" (${code})`);
  }
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) {
    throw new ConfigError(`${name}: "${value}" holds no PEM certificate`);
  }
  return value;
}

export function loadConfig(env: Env = process.env): Config {
  const get = (name: KnownVariable): string | undefined => {
    const value = env[name];
    return value === undefined || value === '' ? undefined : value;
  };
  const optional = (name: KnownVariable, parse: (name: string, value: string) => string) => {
    const value = get(name);
    return value === undefined ? null : parse(name, value);
  };
  const port = parseInteger('PORT', get('PORT') ?? '3000', 0, 65535);
  const host = get('HOST') ?? '127.0.0.1';

  const databaseUrl = get('DATABASE_URL') ?? null;
  if (databaseUrl !== null && !/^postgres(ql)?:\/\/.+/.test(databaseUrl)) {
    throw new ConfigError(
      'DATABASE_URL: must be a postgres:// or postgresql:// URL (unset it to use the embedded database)',
    );
  }
  const statementTimeoutMs = parseDuration(
    'DATABASE_STATEMENT_TIMEOUT',
    get('DATABASE_STATEMENT_TIMEOUT') ?? '5s',
  );
  const connectTimeoutMs = parseDuration(
    'DATABASE_CONNECT_TIMEOUT',
    get('DATABASE_CONNECT_TIMEOUT') ?? '2s',
  );
  for (const [name, value] of [
    ['DATABASE_STATEMENT_TIMEOUT', statementTimeoutMs],
    ['DATABASE_CONNECT_TIMEOUT', connectTimeoutMs],
  ] as const) {
    if (value < 100 || value > 3_600_000) {
      throw new ConfigError(`${name}: must be between 100ms and 1h`);
    }
  }
  const startWaitMs = parseDuration('DATABASE_START_WAIT', get('DATABASE_START_WAIT') ?? '60s');
  if (startWaitMs > 3_600_000) throw new ConfigError('DATABASE_START_WAIT: must be at most 1h');
  const redisUrl = get('REDIS_URL') ?? null;
  if (redisUrl !== null && !/^rediss?:\/\/.+/.test(redisUrl)) {
    throw new ConfigError('REDIS_URL: must be a redis:// or rediss:// URL');
  }
  const publicBaseUrl = parseHttpUrl(
    'PUBLIC_BASE_URL',
    get('PUBLIC_BASE_URL') ?? `http://localhost:${port}`,
  );
  const errorsBaseUrl = parseHttpUrl(
    'ERRORS_BASE_URL',
    get('ERRORS_BASE_URL') ?? `${publicBaseUrl}/errors`,
  );
  const storefrontBaseUrl = parseHttpUrl(
    'STOREFRONT_BASE_URL',
    get('STOREFRONT_BASE_URL') ?? publicBaseUrl,
  );
  const deploymentEnv = get('DEPLOYMENT_ENV') ?? 'test';
  if (deploymentEnv !== 'live' && deploymentEnv !== 'test') {
    throw new ConfigError(`DEPLOYMENT_ENV: "${deploymentEnv}" must be live or test`);
  }
  const adminApiToken = get('ADMIN_API_TOKEN') ?? null;
  if (adminApiToken !== null && !/^\S{32,}$/.test(adminApiToken)) {
    throw new ConfigError(
      'ADMIN_API_TOKEN: must be at least 32 characters without whitespace (e.g. openssl rand -hex 32)',
    );
  }
  const secretKey = get('SECRET_KEY') ?? null;
  if (secretKey !== null && secretKey.length < 32) {
    throw new ConfigError('SECRET_KEY: must be at least 32 characters');
  }

  const scheduleRaw = get('WEBHOOK_RETRY_SCHEDULE') ?? '1m,5m,30m,2h,12h';
  const retryScheduleMs = scheduleRaw
    .split(',')
    .map((part) => parseDuration('WEBHOOK_RETRY_SCHEDULE', part));

  const logLevel = get('LOG_LEVEL') ?? 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError(
      `LOG_LEVEL: "${logLevel}" must be one of fatal, error, warn, info, debug, trace, silent`,
    );
  }

  return {
    port,
    host,
    databaseUrl,
    database: { statementTimeoutMs, connectTimeoutMs, startWaitMs },
    dataDir: resolve(get('DATA_DIR') ?? './data'),
    redisUrl,
    publicBaseUrl,
    errorsBaseUrl,
    storefrontBaseUrl,
    deploymentEnv,
    adminApiToken,
    secretKey,
    webhook: {
      retryScheduleMs,
      timeoutMs: parseInteger(
        'WEBHOOK_TIMEOUT_MS',
        get('WEBHOOK_TIMEOUT_MS') ?? '10000',
        1,
        600_000,
      ),
      autopauseFailures: parseInteger(
        'WEBHOOK_AUTOPAUSE_FAILURES',
        get('WEBHOOK_AUTOPAUSE_FAILURES') ?? '24',
        1,
        1_000_000,
      ),
      autopauseWindowMs: parseDuration(
        'WEBHOOK_AUTOPAUSE_WINDOW',
        get('WEBHOOK_AUTOPAUSE_WINDOW') ?? '24h',
      ),
      keyOverlapMs: parseDuration('WEBHOOK_KEY_OVERLAP', get('WEBHOOK_KEY_OVERLAP') ?? '24h'),
      leaseGraceMs: parseDuration('WEBHOOK_LEASE_GRACE', get('WEBHOOK_LEASE_GRACE') ?? '60s'),
      workerDeadAfterMs: parseMinDuration(
        'WEBHOOK_WORKER_DEAD_AFTER',
        get('WEBHOOK_WORKER_DEAD_AFTER') ?? '10s',
        1_000,
      ),
      allowPrivateTargets: parseBoolean(
        'WEBHOOK_ALLOW_PRIVATE_TARGETS',
        get('WEBHOOK_ALLOW_PRIVATE_TARGETS') ?? 'false',
      ),
      caFile: optional('WEBHOOK_CA_FILE', parseCaFile),
      dnsTimeoutMs: parsePositiveDuration(
        'WEBHOOK_DNS_TIMEOUT',
        get('WEBHOOK_DNS_TIMEOUT') ?? '2s',
      ),
    },
    rateLimit: {
      burstPerSec: parseInteger(
        'RATE_LIMIT_BURST_PER_SEC',
        get('RATE_LIMIT_BURST_PER_SEC') ?? '60',
        1,
        1_000_000,
      ),
      perMin: parseInteger(
        'RATE_LIMIT_PER_MIN',
        get('RATE_LIMIT_PER_MIN') ?? '600',
        1,
        100_000_000,
      ),
      ipPerMin: parseInteger(
        'RATE_LIMIT_IP_PER_MIN',
        get('RATE_LIMIT_IP_PER_MIN') ?? '2000',
        1,
        100_000_000,
      ),
    },
    idempotencyTtlMs: parseDuration('IDEMPOTENCY_TTL', get('IDEMPOTENCY_TTL') ?? '24h'),
    logLevel,
    smtpUrl: optional('SMTP_URL', parseSmtpUrl),
    metrics: {
      token: get('METRICS_TOKEN') ?? null,
      workerPort:
        get('WORKER_METRICS_PORT') === undefined
          ? null
          : parseInteger('WORKER_METRICS_PORT', get('WORKER_METRICS_PORT') as string, 1, 65535),
    },
    shutdownTimeoutMs: parseDuration('SHUTDOWN_TIMEOUT', get('SHUTDOWN_TIMEOUT') ?? '10s'),
    shutdownDrainMs: parseDuration('SHUTDOWN_DRAIN', get('SHUTDOWN_DRAIN') ?? '0s'),
    trustedProxies:
      get('TRUSTED_PROXIES') === undefined
        ? []
        : parseTrustedProxies('TRUSTED_PROXIES', get('TRUSTED_PROXIES') as string),
    retentionDays: parseInteger('RETENTION_DAYS', get('RETENTION_DAYS') ?? '30', 0, 36_500),
  };
}

/**
 * The embedded database keeps a generated SECRET_KEY beside itself, so a laptop needs no setup
 * and the key survives restarts. PostgreSQL deployments must bring their own. `if-present`: a
 * process that seals and opens nothing runs without one (null), and generates none.
 */
export function resolveSecretKey(
  config: Config,
  need: 'required' | 'if-present' = 'required',
): string | null {
  if (config.secretKey) return config.secretKey;
  if (config.databaseUrl) {
    if (need === 'if-present') return null;
    throw new ConfigError(
      'SECRET_KEY: required when DATABASE_URL selects PostgreSQL (at least 32 characters, e.g. openssl rand -hex 32)',
    );
  }
  const file = join(config.dataDir, 'secret.key');
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  if (need === 'if-present') return null;
  makePrivateDirectory(config.dataDir);
  const key = randomBytes(32).toString('base64url');
  writeFileSync(file, `${key}\n`, { mode: 0o600, flag: 'wx' });
  return key;
}

/** Where resolveSecretKey takes the key from, for messages. */
export function secretKeySource(config: Config): string {
  return config.secretKey ? 'the SECRET_KEY variable' : join(config.dataDir, 'secret.key');
}

/**
 * What a printed `npx tourops …` hint puts before the command so that it reaches this process's
 * database when pasted into a shell: DATA_DIR when it is not the default, DATABASE_URL as given,
 * or as "$DATABASE_URL" when it holds a password (never printed). Empty for the defaults.
 */
export function cliEnvPrefix(config: Config): string {
  const quoted = (value: string) => `'${value.replaceAll("'", "'\\''")}'`;
  if (config.databaseUrl) {
    let password = true;
    try {
      password = new URL(config.databaseUrl).password !== '';
    } catch {
      // Printed as the variable, like one with a password.
    }
    return password
      ? 'DATABASE_URL="$DATABASE_URL" '
      : `DATABASE_URL=${quoted(config.databaseUrl)} `;
  }
  return config.dataDir === resolve('./data') ? '' : `DATA_DIR=${quoted(config.dataDir)} `;
}

/** "SQLite in /path" or "PostgreSQL at host/db", never the password. */
/** The embedded database's file in DATA_DIR. */
export function embeddedDatabaseFile(dataDir: string): string {
  return join(dataDir, 'tourops.sqlite');
}

export function describeDatabase(config: Config): string {
  if (!config.databaseUrl) return `SQLite in ${config.dataDir}`;
  try {
    const url = new URL(config.databaseUrl);
    return `PostgreSQL at ${url.host}${url.pathname}`;
  } catch {
    return 'PostgreSQL';
  }
}
