import { chmodSync, constants, copyFileSync, existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describeDatabase } from '../config.ts';
import { demoInstructions, seedDemo } from '../demo.ts';
import { newSigningKey } from '../domain/signing.ts';
import {
  tenantCreateCommand,
  tenantListCommand,
  tenantOption,
  tokenCreateCommand,
  tokenListCommand,
  tokenRevokeCommand,
} from './account-commands.ts';
import { UsageError } from './args.ts';
import { type Command, namingNotFound } from './command.ts';
import {
  checkSigningKey,
  parseEventTypes,
  parseLoopbackUrl,
  parsePayloadForm,
  parseProcesses,
} from './values.ts';
import {
  deliveryListCommand,
  deliveryRecoverCommand,
  deliveryRedeliverCommand,
  webhookEnableCommand,
  webhookListCommand,
  webhooksEnableCommand,
  webhookTransformationCommand,
} from './webhook-commands.ts';

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
      'its heartbeat is WEBHOOK_WORKER_DEAD_AFTER old. With WORKER_METRICS_PORT set it serves ' +
      'its Prometheus metrics at /metrics on that port, and /healthz and /readyz (503 while its ' +
      'database does not answer, its heartbeat is late, or it stops). Started while its database ' +
      'does not answer, it waits for it up to DATABASE_START_WAIT.',
  ],
  positionals: [],
  options: {},
  json: false,
  logsVariableNames: true,
  async run(ctx) {
    const config = ctx.config();
    const [{ createServingRuntime }, { startWorker }, { stopOnSignals, warnAtStartup }, probes] =
      await Promise.all([
        import('../runtime.ts'),
        import('../start-worker.ts'),
        import('../serve.ts'),
        import('../http/probe-server.ts'),
      ]);
    // Before the database: a worker waiting for it is alive, and not ready.
    const port = config.metrics.workerPort;
    const probeServer =
      port === null ? null : await probes.ProbeServer.listen(config, port, 'not-found');
    const runtime = await createServingRuntime(config, { listen: true });
    warnAtStartup(runtime, ctx.io.env);
    const worker = startWorker(runtime);
    const ready = probes.workerReadiness(worker.worker, runtime.database);
    probeServer?.attach({ ready, metrics: runtime.metrics });
    // Before the announcement: whoever waits for it may signal at once. The probes answer until
    // the worker has stopped: `/readyz` says draining meanwhile.
    stopOnSignals(runtime, config.shutdownTimeoutMs, async () => {
      await worker.stop();
      await probeServer?.close();
    });
    ctx.io.stdout.write(`Webhook delivery worker running (${describeDatabase(config)})\n`);
    return 'serving';
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
    const demo = await ctx.withRuntime((runtime) => seedDemo(runtime), { creates: true });
    const baseUrl = ctx.config().publicBaseUrl;
    ctx.print(`${demoInstructions(demo, baseUrl)}(with the API running: tourops serve)\n`, demo);
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
    payload: {
      type: 'string',
      value: '<full|thin>',
      description: "the bodies' form, as a subscription's `payload` (default: full)",
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
    const payload = parsePayloadForm(args.string('payload'), command);
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
        // Said once the start is read, so that an event made on seeing it is forwarded.
        const ready = () =>
          ctx.io.stdout.write(
            `Forwarding ${events === null ? 'every event' : [...events].join(', ')} of tenant ` +
              `"${tenant.slug}" (${tenant.id}) to ${forwardTo.href}; Ctrl-C stops.\n` +
              `Signing key: ${signingKey}\n`,
          );
        const options = { tenantId: tenant.id, events, forwardTo, signingKey, payload, ready };
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
  webhookListCommand,
  webhookEnableCommand,
  webhookTransformationCommand,
  webhooksEnableCommand,
  deliveryListCommand,
  deliveryRedeliverCommand,
  deliveryRecoverCommand,
  listenCommand,
  backupCommand,
];
