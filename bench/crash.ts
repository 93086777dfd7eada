/**
 * The crash row: a worker killed with SIGKILL in the middle of a backlog run, restarted at once. How long
 * after the kill the deliveries it had in flight reach the receiver again, and how long until every
 * event has. Runs alone too: `tsx bench/crash.ts --backend sqlite|postgres [--pg-url <url>]`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import pino from 'pino';
import { loadConfig } from '../src/config.ts';
import { createRuntime } from '../src/runtime.ts';
import { testCa } from '../test/helpers/https-receiver.ts';
import { emitBacklog, webhookServerEnv } from './deliveries.ts';
import { DEFAULT_PG_URL, type ServerProcess, startServer } from './processes.ts';

const EVENTS = 400;
/** Each answer takes this long, so that a worker always has attempts in flight. */
const ANSWER_MS = 200;
const KILL_AFTER = 100;
const LIMIT_MS = 240_000;

export interface CrashResult {
  backend: string;
  events: number;
  /** Attempts in flight (arrived, unanswered) when the worker was killed. */
  inFlightAtKill: number;
  /** From the kill until the last of those arrived again. */
  worstResendMs: number;
  /** From the kill until every event had arrived at least once. */
  allDeliveredMs: number;
  /** Events that never arrived (must be 0). */
  lost: number;
}

export async function benchCrash(options: {
  backend: string;
  dbEnv: Record<string, string>;
  log(message: string): void;
  track(server: ServerProcess, running: boolean): void;
}): Promise<CrashResult> {
  const ca = await testCa();
  /** First arrival of each event id, and every arrival after the kill, by id. */
  const firstAt = new Map<string, number>();
  const answered = new Set<string>();
  const again = new Map<string, number>();
  let killedAt: number | null = null;
  let onArrival: (() => void) | null = null;
  const server = createServer({ key: ca.key, cert: ca.cert }, (req, res) => {
    const at = performance.now();
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const id = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: string }).id;
      if (!firstAt.has(id)) firstAt.set(id, at);
      else if (killedAt !== null && !again.has(id)) again.set(id, at);
      onArrival?.();
      setTimeout(() => {
        answered.add(id);
        res.writeHead(200).end();
      }, ANSWER_MS);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  const env = webhookServerEnv(options.dbEnv, 'warn', ca.caFile);
  const runtime = await createRuntime(loadConfig({ ...env, LOG_LEVEL: 'silent' }), {
    logger: pino({ level: 'silent' }),
  });
  const until = (done: () => boolean, what: string) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`crash run: ${what} not in time`)), LIMIT_MS);
      onArrival = () => {
        if (!done()) return;
        clearTimeout(timer);
        onArrival = null;
        resolve();
      };
      onArrival();
    });
  const servers: ServerProcess[] = [];
  try {
    const tenant = await runtime.services.tenants.create({
      name: 'Bench Crash',
      slug: 'bench-crash',
      tier: 'enterprise',
    });
    await runtime.services.webhooks.create(tenant.id, {
      url: `https://127.0.0.1:${address.port}/crash`,
      events: ['client.created'],
    });
    await emitBacklog(runtime, tenant.id, EVENTS);
    const start = async (name: string) => {
      const started = await startServer({ name, entry: 'src/main.ts', env });
      options.track(started, true);
      servers.push(started);
      return started;
    };
    const first = await start(`api-${options.backend}-crash-1`);
    await until(() => firstAt.size >= KILL_AFTER, `${KILL_AFTER} arrivals`);
    killedAt = performance.now();
    process.kill(first.pid, 'SIGKILL');
    options.track(first, false);
    const inFlight = [...firstAt.keys()].filter((id) => !answered.has(id));
    options.log(`${options.backend}: crash: killed with ${inFlight.length} attempts in flight`);
    await start(`api-${options.backend}-crash-2`);
    await until(
      () => firstAt.size >= EVENTS && inFlight.every((id) => again.has(id)),
      'every event and every resend',
    );
    const kill = killedAt;
    return {
      backend: options.backend,
      events: EVENTS,
      inFlightAtKill: inFlight.length,
      worstResendMs: Math.max(0, ...inFlight.map((id) => (again.get(id) as number) - kill)),
      allDeliveredMs: Math.max(...firstAt.values(), ...again.values()) - kill,
      lost: EVENTS - firstAt.size,
    };
  } finally {
    for (const started of servers) await started.stop().catch(() => undefined);
    await runtime.close();
    server.closeAllConnections();
    server.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: { backend: { type: 'string', default: 'sqlite' }, 'pg-url': { type: 'string' } },
  });
  const dir = mkdtempSync(join(tmpdir(), 'tourops-crash-'));
  let dbEnv: Record<string, string> = { DATA_DIR: dir };
  let drop: () => Promise<void> = async () => {};
  if (values.backend === 'postgres') {
    const base = values['pg-url'] ?? DEFAULT_PG_URL;
    const name = `tourops_crash_${Date.now()}`;
    const admin = new pg.Client({ connectionString: base });
    await admin.connect();
    await admin.query(`create database ${name}`);
    await admin.end();
    const url = new URL(base);
    url.pathname = `/${name}`;
    dbEnv = { DATA_DIR: dir, DATABASE_URL: url.toString(), SECRET_KEY: 'c'.repeat(64) };
    drop = async () => {
      const again = new pg.Client({ connectionString: base });
      await again.connect();
      await again.query(`drop database if exists ${name} with (force)`);
      await again.end();
    };
  }
  try {
    const result = await benchCrash({
      backend: values.backend ?? 'sqlite',
      dbEnv,
      log: (message) => console.error(`[bench] ${message}`),
      track: () => undefined,
    });
    console.log(JSON.stringify(result));
  } finally {
    await drop();
    rmSync(dir, { recursive: true, force: true });
  }
}
