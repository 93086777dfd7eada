import { chmodSync, constants, copyFileSync, existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { cliEnvPrefix, describeDatabase } from '../config.ts';
import { demoInstructions, seedDemo } from '../demo.ts';
import { isTier, TIER_NAMES } from '../domain/plans.ts';
import { newSigningKey } from '../domain/signing.ts';
import { DELIVERY_STATUSES, isOneOf } from '../domain/states.ts';
import { ApiProblem } from '../lib/problems.ts';
import type { Runtime } from '../runtime.ts';
import { type OptionSpec, type ParsedArgs, type PositionalSpec, UsageError } from './args.ts';
import type { CommandContext } from './context.ts';
import {
  checkSigningKey,
  checkSlug,
  checkTenantName,
  columns,
  parseEventTypes,
  parseExpiry,
  parseLoopbackUrl,
  parseProcesses,
  parseScopes,
} from './values.ts';

/** `serving`: the command keeps the process alive (the server) and exits on a signal. */
type CommandOutcome = 'done' | 'serving';

export interface Command {
  /** The words typed after `tourops`, e.g. `token create`. */
  name: string;
  summary: string;
  /** Paragraphs of help text after the usage line. */
  description: string[];
  /** Command lines shown as they are (never wrapped), each one runnable as printed. */
  examples?: string[];
  positionals: PositionalSpec[];
  options: Record<string, OptionSpec>;
  /** Whether `--json` is accepted. */
  json: boolean;
  /** Its start-up log names misspelt variables itself (else they are said on stderr first). */
  logsVariableNames?: true;
  run(ctx: CommandContext, args: ParsedArgs): Promise<CommandOutcome>;
}

const serveCommand: Command = {
  name: 'serve',
  summary: 'run the API (applies pending migrations first)',
  description: [
    'Serves the public API, the admin API and the OpenAPI document on HOST:PORT until SIGINT or ' +
      'SIGTERM. Unlike `npm start` it never seeds the demo tenant; use `tourops demo` for that.',
    'Its output is the start-up banner and JSON log lines, so it takes no --json.',
  ],
  logsVariableNames: true,
  positionals: [],
  options: {
    'no-worker': {
      type: 'boolean',
      description:
        'run the API without the webhook delivery worker (run `tourops worker` processes instead)',
    },
    processes: {
      type: 'string',
      value: '<n|auto>',
      description:
        'API processes sharing the port (node:cluster; default 1, auto: one per core), each with its ' +
        "share of the worker's slots; rate limits and /metrics count for all of them together",
    },
  },
  json: false,
  async run(ctx, args) {
    const config = ctx.config();
    const processes = parseProcesses(args.string('processes'));
    // Heavy modules load only when a command needs them, so --help stays instant.
    const [{ serve }, cluster, { servePrimary, workerShare }] = await Promise.all([
      import('../serve.ts'),
      import('node:cluster'),
      import('../cluster.ts'),
    ]);
    const worker = !args.flag('no-worker');
    if (processes > 1 && cluster.default.isPrimary) await servePrimary(config, processes);
    else await serve(config, { seedDemo: false, worker, workerOptions: workerShare(processes) });
    return 'serving';
  },
};

const workerCommand: Command = {
  name: 'worker',
  summary: 'deliver webhooks only (run as many as you like)',
  description: [
    'Claims due webhook deliveries and sends them until SIGINT or SIGTERM; then it stops claiming, ' +
      'lets running attempts finish within WEBHOOK_TIMEOUT_MS, records them and exits 0. Any number ' +
      'of workers (and `tourops serve` processes with their own worker) may share one PostgreSQL ' +
      "database: claims are atomic, and a killed worker's claims are sent again by another once " +
      'its heartbeat is 10 s old. With WORKER_METRICS_PORT set it serves its ' +
      'Prometheus metrics at /metrics on that port.',
  ],
  positionals: [],
  options: {},
  json: false,
  logsVariableNames: true,
  async run(ctx) {
    const config = ctx.config();
    const [{ createRuntime }, { startWorker }, { stopOnSignals, warnMisspeltVariables }] =
      await Promise.all([
        import('../runtime.ts'),
        import('../start-worker.ts'),
        import('../serve.ts'),
      ]);
    const runtime = await createRuntime(config, { listen: true });
    warnMisspeltVariables(runtime.logger, ctx.io.env);
    const worker = startWorker(runtime);
    const metricsServer =
      config.metrics.workerPort === null
        ? null
        : await (await import('../http/metrics-server.ts')).startMetricsServer(
            config,
            runtime.metrics,
          );
    // Before the announcement: whoever waits for it may signal at once.
    stopOnSignals(runtime, config.shutdownTimeoutMs, async () => {
      metricsServer?.close();
      await worker.stop();
    });
    ctx.io.stdout.write(`Webhook delivery worker running (${describeDatabase(config)})\n`);
    return 'serving';
  },
};

const webhookEnableCommand: Command = {
  name: 'webhook enable',
  summary: 're-enable a paused webhook subscription',
  description: [
    'Makes the subscription active again and clears pausedAt and consecutiveFailures; its pending ' +
      'deliveries resume. A deleted subscription cannot be re-enabled.',
    'JSON: the subscription object.',
  ],
  positionals: [{ name: 'id', description: 'the subscription id (whs_…)' }],
  options: {},
  json: true,
  async run(ctx, args) {
    const [id] = args.positionals;
    const subscription = await ctx.withRuntime((runtime) =>
      namingNotFound(runtime, runtime.services.webhooks.enable(id), `Webhook subscription "${id}"`),
    );
    ctx.print(
      `Webhook subscription ${subscription.id} enabled (${subscription.url}).\n`,
      subscription,
    );
    return 'done';
  },
};

const migrateCommand: Command = {
  name: 'migrate',
  summary: 'apply pending database migrations',
  description: [
    'Applies the pending migrations in one transaction; safe to run while other processes start. ' +
      'Every other command (and `npm start`) migrates on its own too.',
    'To upgrade a running fleet, run it first with the new release: the previous release goes on ' +
      'serving on the migrated schema while each process is restarted in turn (docs/operations.md, ' +
      '"Several machines").',
    'JSON: {"applied": [<migration id>, ...]}',
  ],
  positionals: [],
  options: {},
  json: true,
  async run(ctx) {
    const config = ctx.config();
    // The database alone: migrating needs neither the services nor the SECRET_KEY.
    const [{ createDatabase }, { migrate }] = await Promise.all([
      import('../db/database.ts'),
      import('../db/migrate.ts'),
    ]);
    // No statement time-out: a migration may rewrite a large table.
    const database = createDatabase({
      databaseUrl: config.databaseUrl,
      dataDir: config.dataDir,
      statementTimeoutMs: 0,
      connectTimeoutMs: config.database.connectTimeoutMs,
    });
    let applied: string[];
    try {
      applied = await migrate(database);
    } finally {
      await database.close();
    }
    const where = describeDatabase(config);
    ctx.print(
      applied.length === 0
        ? `No pending migrations: ${where} is up to date.\n`
        : `Applied ${applied.length} migration${applied.length === 1 ? '' : 's'} to ${where}: ${applied.join(', ')}\n`,
      { applied },
    );
    return 'done';
  },
};

const demoCommand: Command = {
  name: 'demo',
  summary: 'seed the demo tenant and print its token',
  description: [
    'Creates the tenant "demo" (tier pro) with a library, clients, trips, bookings and payments, ' +
      'and a token with every scope, shown only now. Fails if a tenant "demo" already exists.',
    'JSON: {"tenantId", "tenantSlug", "token"}',
  ],
  positionals: [],
  options: {},
  json: true,
  async run(ctx) {
    const demo = await ctx.withRuntime((runtime) => seedDemo(runtime));
    const baseUrl = ctx.config().publicBaseUrl;
    ctx.print(`${demoInstructions(demo, baseUrl)}(with the API running: tourops serve)\n`, demo);
    return 'done';
  },
};

const tenantCreateCommand: Command = {
  name: 'tenant create',
  summary: 'create a tenant',
  description: [
    'JSON: the tenant {"id", "name", "slug", "tier", "active", "tripQuota", "webhookEndpointCap", ...}',
  ],
  examples: ['npx tourops tenant create --name "Acme Tours" --slug acme --tier pro'],
  positionals: [],
  options: {
    name: {
      type: 'string',
      value: '<name>',
      required: true,
      description: 'display name, 1-200 characters',
    },
    slug: {
      type: 'string',
      value: '<slug>',
      required: true,
      description: 'unique handle: lower-case letters, digits and hyphens',
    },
    tier: {
      type: 'string',
      value: `<${TIER_NAMES.join('|')}>`,
      required: true,
      description: 'plan tier (free has no API access)',
    },
  },
  json: true,
  async run(ctx, args) {
    const command = 'tenant create';
    // Every bad value at once, not the first of them.
    const problems: string[] = [];
    const checked = <T>(check: () => T): T | undefined => {
      try {
        return check();
      } catch (error) {
        if (!(error instanceof UsageError)) throw error;
        problems.push(error.message);
        return undefined;
      }
    };
    const name = checked(() => checkTenantName(args.required('name'), command));
    const slug = checked(() => checkSlug(args.required('slug'), command));
    const tier = args.required('tier');
    if (!isTier(tier))
      problems.push(`--tier must be one of ${TIER_NAMES.join(', ')} (got "${tier}")`);
    if (problems.length > 0 || name === undefined || slug === undefined || !isTier(tier)) {
      throw new UsageError(problems.join('; '), command);
    }
    const tenant = await ctx.withRuntime((runtime) =>
      runtime.services.tenants.create({ name, slug, tier }),
    );
    ctx.print(
      `Tenant "${tenant.slug}" created: ${tenant.id} (tier ${tenant.tier}).\n` +
        `Mint a token with: ${cliEnvPrefix(ctx.config())}npx tourops token create --tenant ${tenant.slug} --scopes all\n`,
      tenant,
    );
    return 'done';
  },
};

const tenantOption = {
  tenant: {
    type: 'string' as const,
    value: '<id|slug>',
    required: true,
    description: 'tenant id (ten_…) or slug',
  },
};

const tokenCreateCommand: Command = {
  name: 'token create',
  summary: 'mint an API token for a tenant and print its value once',
  description: [
    'Only the SHA-256 of the token is stored: its value is printed now and never again.',
    'JSON: the token object {"id", "name", "prefix", "scopes", "expiresAt", "createdAt", "revoked", ...} plus "token", the value.',
  ],
  examples: [
    'npx tourops token create --tenant acme --scopes trips:read,clients:write --name "booking sync"',
  ],
  positionals: [],
  options: {
    ...tenantOption,
    scopes: {
      type: 'string',
      value: '<list|all>',
      required: true,
      description:
        'comma-separated scopes, e.g. trips:read,clients:read, or * for all ten (all works too)',
    },
    expires: {
      type: 'string',
      value: '<date>',
      description:
        'expiry: an ISO date (2027-12-31, midnight UTC) or date-time with a time zone (2027-12-31T18:00:00Z); default never',
    },
    name: {
      type: 'string',
      value: '<name>',
      description: 'a label for the token, e.g. "booking sync"',
    },
  },
  json: true,
  async run(ctx, args) {
    const command = 'token create';
    const tenantRef = args.required('tenant');
    const scopes = parseScopes(args.required('scopes'), command);
    const expires = args.string('expires');
    const expiresAt = expires === undefined ? null : parseExpiry(expires, new Date(), command);
    const name = args.string('name') ?? null;
    const { tenant, minted } = await ctx.withRuntime(async (runtime) => {
      const tenant = await namingNotFound(
        runtime,
        runtime.services.tenants.resolve(tenantRef),
        `Tenant "${tenantRef}"`,
      );
      const minted = await runtime.services.tokens.mint(tenant.id, { scopes, name, expiresAt });
      return { tenant, minted };
    });
    const { token, value } = minted;
    ctx.print(
      `Token ${token.id} minted for tenant "${tenant.slug}" (${tenant.id}).\n` +
        `  scopes:  ${token.scopes.join(', ')}\n` +
        `  expires: ${token.expiresAt ?? 'never'}\n` +
        (token.name === null ? '' : `  name:    ${token.name}\n`) +
        `\nIts value, shown only now:\n\n  ${value}\n\n`,
      { ...token, token: value },
    );
    return 'done';
  },
};

const tokenRevokeCommand: Command = {
  name: 'token revoke',
  summary: 'revoke an API token',
  description: [
    'Requests with the token get 401 from now on. Revoking a revoked token changes nothing.',
    'JSON: the token object, with "revoked": true.',
  ],
  positionals: [{ name: 'id', description: 'the token id (tok_…)' }],
  options: {},
  json: true,
  async run(ctx, args) {
    const [id] = args.positionals;
    const token = await ctx.withRuntime((runtime) =>
      namingNotFound(runtime, runtime.services.tokens.revoke(id), `Token "${id}"`),
    );
    ctx.print(`Token ${token.id} (${token.prefix}…) revoked.\n`, token);
    return 'done';
  },
};

const backupCommand: Command = {
  name: 'backup',
  summary: 'copy the embedded database, and the key its signing keys need, while it serves',
  description: [
    'Writes a consistent copy of DATA_DIR/tourops.sqlite to <file> (SQLite online backup: the ' +
      'server keeps serving). Webhook signing keys are stored encrypted with SECRET_KEY: when it ' +
      'was generated into DATA_DIR, it is copied to <file>.secret.key (mode 0600); when it is ' +
      'set in the environment, keep it yourself. To restore: stop the service, put <file> as ' +
      'DATA_DIR/tourops.sqlite and <file>.secret.key as DATA_DIR/secret.key, start it.',
    'With DATABASE_URL (PostgreSQL) use pg_dump instead, and keep SECRET_KEY.',
    'JSON: {"database": <file>, "secretKey": <file>.secret.key or null}.',
  ],
  positionals: [{ name: 'file', description: 'where to write the copy (must not exist)' }],
  options: {},
  json: true,
  async run(ctx, args) {
    const [target] = args.positionals;
    const file = resolve(target);
    if (existsSync(file)) throw new UsageError(`${target} exists: choose a new file`, 'backup');
    const keyFile = await ctx.withRuntime(
      async (runtime) => {
        await runtime.database.backup(file);
        chmodSync(file, 0o600);
        if (runtime.config.secretKey !== null) return null;
        const copy = `${file}.secret.key`;
        copyFileSync(join(runtime.config.dataDir, 'secret.key'), copy, constants.COPYFILE_EXCL);
        chmodSync(copy, 0o600);
        return copy;
      },
      // The copy's key goes with it.
      { needsKey: true },
    );
    ctx.print(
      `Database copied to ${file}.\n` +
        (keyFile === null
          ? "SECRET_KEY is set in the environment: keep it, or the copy's signing keys cannot be read.\n"
          : `Its signing keys need ${keyFile}: keep both together, privately.\n`),
      { database: file, secretKey: keyFile },
    );
    return 'done';
  },
};

const webhookOption = {
  webhook: {
    type: 'string' as const,
    value: '<id>',
    required: true,
    description: 'the subscription id (whs_…)',
  },
};

const deliveryListCommand: Command = {
  name: 'delivery list',
  summary: "list a webhook subscription's deliveries, newest first",
  description: ["JSON: an array of deliveries (the API's delivery objects), newest first."],
  positionals: [],
  options: {
    ...webhookOption,
    status: {
      type: 'string',
      value: '<pending|in_flight|success|dead_letter>',
      description: 'only deliveries in this status',
    },
    limit: { type: 'string', value: '<n>', description: 'at most n (1-100, default 20)' },
    cursor: {
      type: 'string',
      value: '<cursor>',
      description: 'the next page, as the previous page printed it',
    },
  },
  json: true,
  async run(ctx, args) {
    const command = 'delivery list';
    const id = args.required('webhook');
    const status = args.string('status');
    if (status !== undefined && !isOneOf(DELIVERY_STATUSES, status)) {
      throw new UsageError(`--status must be one of ${DELIVERY_STATUSES.join(', ')}`, command);
    }
    const limit = Number(args.string('limit') ?? '20');
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) {
      throw new UsageError('--limit must be an integer from 1 to 100', command);
    }
    const page = await ctx.withRuntime(async (runtime) => {
      const { webhooks, deliveries } = runtime.services;
      const tenantId = await namingNotFound(
        runtime,
        webhooks.tenantOf(id),
        `Webhook subscription "${id}"`,
      );
      return deliveries.listDeliveries(tenantId, id, {
        limit,
        status,
        cursor: args.string('cursor'),
      });
    });
    const lines = page.data.map(
      (d) =>
        `${d.id}  ${d.status}  ${d.eventType}  attempts ${d.attempts}` +
        `${d.lastResponseStatus === null ? '' : `  last ${d.lastResponseStatus}`}` +
        `${d.lastError === null ? '' : `  ${d.lastError}`}  ${d.createdAt}\n`,
    );
    const more = page.meta.hasMore
      ? `More: tourops delivery list --webhook ${id} --cursor ${page.meta.cursor}\n`
      : '';
    ctx.print(lines.length === 0 ? 'No deliveries.\n' : lines.join('') + more, page.data);
    return 'done';
  },
};

const deliveryRedeliverCommand: Command = {
  name: 'delivery redeliver',
  summary: 'send a delivery again (a new delivery, the same event)',
  description: ['JSON: {"deliveryId", "eventId", "status": "pending"}.'],
  positionals: [{ name: 'delivery', description: 'the delivery id (dlv_…)' }],
  options: {
    webhook: {
      ...webhookOption.webhook,
      required: false,
      description: "the subscription id (whs_…); default: the delivery's own",
    },
  },
  json: true,
  async run(ctx, args) {
    const [deliveryId] = args.positionals;
    const queued = await ctx.withRuntime(async (runtime) => {
      const { webhooks, deliveries } = runtime.services;
      // Delivery ids are unique: the subscription is the delivery's unless one is named.
      const id =
        args.string('webhook') ??
        (await namingNotFound(
          runtime,
          deliveries.subscriptionOfDelivery(deliveryId),
          `Delivery "${deliveryId}"`,
        ));
      const tenantId = await namingNotFound(
        runtime,
        webhooks.tenantOf(id),
        `Webhook subscription "${id}"`,
      );
      return namingNotFound(
        runtime,
        deliveries.redeliver(tenantId, id, deliveryId),
        `Delivery "${deliveryId}"`,
      );
    });
    ctx.print(`Queued ${queued.deliveryId} (event ${queued.eventId}).\n`, queued);
    return 'done';
  },
};

const deliveryRecoverCommand: Command = {
  name: 'delivery recover',
  summary: 'redeliver every dead letter of a time window (at most 10,000)',
  description: [
    'Queues one new delivery for every dead-lettered delivery of the subscription created at or ' +
      'after --since and before --until (default now), as POST /api/v1/webhooks/{id}/recover does.',
    'JSON: {"queued": <n>}.',
  ],
  positionals: [],
  options: {
    ...webhookOption,
    since: {
      type: 'string',
      value: '<date-time>',
      required: true,
      description: 'start of the window, e.g. 2026-11-24T00:00:00Z',
    },
    until: { type: 'string', value: '<date-time>', description: 'end of the window (excluded)' },
  },
  json: true,
  async run(ctx, args) {
    const id = args.required('webhook');
    const since = args.required('since');
    const until = args.string('until');
    const result = await ctx.withRuntime(async (runtime) => {
      const { webhooks, deliveries } = runtime.services;
      const tenantId = await namingNotFound(
        runtime,
        webhooks.tenantOf(id),
        `Webhook subscription "${id}"`,
      );
      return deliveries.recover(tenantId, id, until === undefined ? { since } : { since, until });
    });
    ctx.print(`Queued ${result.queued} deliveries.\n`, result);
    return 'done';
  },
};

/** The plural spelling of earlier versions, kept working. */
const webhooksEnableCommand: Command = {
  ...webhookEnableCommand,
  name: 'webhooks enable',
  summary: 'the same as webhook enable (kept for scripts)',
};

const tenantListCommand: Command = {
  name: 'tenant list',
  summary: 'list every tenant',
  description: ['JSON: an array of tenants, oldest first.'],
  positionals: [],
  options: {},
  json: true,
  async run(ctx) {
    const tenants = await ctx.withRuntime((runtime) => runtime.services.tenants.list());
    const rows = tenants.map((t) => [
      t.id,
      t.slug,
      t.active ? t.tier : `${t.tier} (inactive)`,
      t.name,
    ]);
    ctx.print(
      rows.length === 0 ? 'No tenants.\n' : columns(['ID', 'SLUG', 'TIER', 'NAME'], rows),
      tenants,
    );
    return 'done';
  },
};

const tokenListCommand: Command = {
  name: 'token list',
  summary: "list a tenant's tokens (never their values)",
  description: ['JSON: an array of token objects, oldest first, revoked ones included.'],
  positionals: [],
  options: {
    ...tenantOption,
  },
  json: true,
  async run(ctx, args) {
    const tenantRef = args.required('tenant');
    const tokens = await ctx.withRuntime((runtime) =>
      namingNotFound(runtime, runtime.services.tokens.list(tenantRef), `Tenant "${tenantRef}"`),
    );
    const rows = tokens.map((t) => [
      t.id,
      `${t.prefix}…`,
      t.revoked ? 'revoked' : t.expiresAt ? `expires ${t.expiresAt}` : 'active',
      t.scopes.join(','),
      t.name === null ? '' : `"${t.name}"`,
    ]);
    ctx.print(
      rows.length === 0
        ? 'No tokens.\n'
        : columns(['ID', 'PREFIX', 'STATE', 'SCOPES', 'NAME'], rows),
      tokens,
    );
    return 'done';
  },
};

const listenCommand: Command = {
  name: 'listen',
  summary: "forward a tenant's events to a local URL while it runs (like `stripe listen`)",
  description: [
    "Reads the tenant's events as they are committed (from now on; test fires excluded) and POSTs " +
      'each to --forward-to, a URL on this machine, signed like a webhook delivery: same body, same ' +
      'Service-* headers, with the signing key it prints (or --signing-key). One at a time, in order, ' +
      'no retries; each line shows the event and the local answer. No subscription is created and ' +
      'nothing is written: Ctrl-C (or SIGTERM) stops it and leaves nothing behind.',
  ],
  examples: [
    'npx tourops listen --tenant demo --events client.created --forward-to http://localhost:4242/webhooks',
  ],
  positionals: [],
  options: {
    ...tenantOption,
    'forward-to': {
      type: 'string',
      value: '<url>',
      required: true,
      description: 'http(s) URL on this machine: localhost, 127.0.0.1 or [::1]',
    },
    events: {
      type: 'string',
      value: '<a,b>',
      description: 'comma-separated event types (default: every type)',
    },
    'signing-key': {
      type: 'string',
      value: '<whsec_…>',
      description: 'sign with this key (keep one across runs); default: a new key each run',
    },
  },
  json: false,
  async run(ctx, args) {
    const command = 'listen';
    const tenantRef = args.required('tenant');
    const forwardTo = parseLoopbackUrl(args.required('forward-to'), 'forward-to', command);
    const types = args.string('events');
    const events = types === undefined ? null : new Set(parseEventTypes(types, command));
    const key = args.string('signing-key');
    const signingKey = key === undefined ? newSigningKey() : checkSigningKey(key, command);
    const { forwardEvents } = await import('./listen.ts');
    const stop = new AbortController();
    const onSignal = () => stop.abort();
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    try {
      const forwarded = await ctx.withRuntime(async (runtime) => {
        const tenant = await namingNotFound(
          runtime,
          runtime.services.tenants.resolve(tenantRef),
          `Tenant "${tenantRef}"`,
        );
        ctx.io.stdout.write(
          `Forwarding ${events === null ? 'every event' : [...events].join(', ')} of tenant ` +
            `"${tenant.slug}" (${tenant.id}) to ${forwardTo.href}; Ctrl-C stops.\n` +
            `Signing key: ${signingKey}\n`,
        );
        const options = { tenantId: tenant.id, events, forwardTo, signingKey };
        return forwardEvents(runtime, options, ctx.io.stdout, stop.signal);
      });
      ctx.io.stdout.write(`Stopped after forwarding ${forwarded} event(s).\n`);
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
    return 'done';
  },
};

/**
 * The services say "Tenant was not found."; on a command line, name what was typed and where it
 * was looked for (a DATA_DIR or DATABASE_URL other than the server's is the usual reason).
 */
async function namingNotFound<T>(runtime: Runtime, work: Promise<T>, what: string): Promise<T> {
  try {
    return await work;
  } catch (error) {
    if (error instanceof ApiProblem && error.slug === 'not-found') {
      throw new ApiProblem(
        'not-found',
        `${what} was not found in ${describeDatabase(runtime.config)}.`,
      );
    }
    throw error;
  }
}

/** The command table, in help order. */
export const COMMANDS: Command[] = [
  serveCommand,
  workerCommand,
  migrateCommand,
  demoCommand,
  tenantCreateCommand,
  tenantListCommand,
  tokenCreateCommand,
  tokenListCommand,
  tokenRevokeCommand,
  webhookEnableCommand,
  webhooksEnableCommand,
  deliveryListCommand,
  deliveryRedeliverCommand,
  deliveryRecoverCommand,
  listenCommand,
  backupCommand,
];
