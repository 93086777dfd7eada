/**
 * Child processes of the benchmark: every server under test runs in its own Node process, so
 * autocannon (in the benchmark process) and the server never share an event loop or a core.
 * Every child is tracked and killed when the benchmark ends, however it ends.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const AGENT = pathToFileURL(join(REPO_ROOT, 'bench', 'child-agent.ts')).href;

const live = new Set<ChildProcess>();

/** Last resort, synchronous: nothing may outlive the benchmark. */
export function killAllChildrenNow(): void {
  // The children's children too: a paused cluster's processes would not notice their primary go.
  for (const child of live) {
    if (child.pid !== undefined) signalTree(child.pid, 'SIGKILL');
  }
  live.clear();
}
process.on('exit', killAllChildrenNow);

/**
 * A free TCP port on the loopback interface, released for the child to bind, from
 * TEST_PORT_RANGE: at random, so that two runs sharing the range rarely try the same one, and
 * each checked free by binding it.
 */
export async function freePort(): Promise<number> {
  const { from, to } = portRange(process.env.TEST_PORT_RANGE);
  for (let tries = 0; tries < 100; tries++) {
    const port = from + Math.floor(Math.random() * (to - from + 1));
    if (await bindable(port)) return port;
  }
  throw new Error(`no free port in TEST_PORT_RANGE ${from}-${to}`);
}

/**
 * The ports the tests and the bench give their servers: TEST_PORT_RANGE (`<from>-<to>`), by
 * default below Linux's ephemeral range (32768 and up), from which every outgoing connection
 * takes its local port: a port found free there is not taken by a connection before its server
 * binds it, as a port from listen(0) may be.
 */
export function portRange(setting = '20000-31999'): { from: number; to: number } {
  const match = /^(\d+)-(\d+)$/.exec(setting.trim());
  const [from, to] = match ? [Number(match[1]), Number(match[2])] : [0, 0];
  if (!match || from < 1024 || to > 65535 || to - from < 100) {
    throw new Error(
      `TEST_PORT_RANGE: "${setting}" must be <from>-<to>, 1024-65535, 100 ports or more`,
    );
  }
  return { from, to };
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** The benchmark's PostgreSQL server: given, from BENCH_PG_URL, or the local one. */
export const DEFAULT_PG_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** Whether a database URL points at 127.0.0.1: the benchmark never leaves loopback. */
export function onLoopback(url: string): boolean {
  return URL.canParse(url) && new URL(url).hostname === '127.0.0.1';
}

let clockTicks: number | null = null;
function ticksPerSecond(): number {
  if (clockTicks === null) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/**
 * User + system CPU seconds a process has used so far (Linux /proc), or null elsewhere (or once it
 * has ended). `reaped`: with its ended children's that it waited for (/proc's cutime and cstime).
 */
export function processCpuSeconds(pid: number, reaped = false): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const own = Number(fields[11]) + Number(fields[12]);
    const children = reaped ? Number(fields[13]) + Number(fields[14]) : 0;
    return (own + children) / ticksPerSecond();
  } catch {
    return null;
  }
}

/** CPU seconds so far: the whole process, and its main thread (its JavaScript) alone. */
export interface CpuSplit {
  total: number;
  /** The main thread, user and system; the rest is V8's helper threads (compiler, collector). */
  mainUser: number;
  mainSystem: number;
}

/** A process's CpuSplit (Linux /proc), or null. */
export function cpuSplit(pid: number): CpuSplit | null {
  const total = processCpuSeconds(pid);
  if (total === null) return null;
  try {
    const stat = readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = ticksPerSecond();
    return { total, mainUser: Number(fields[11]) / ticks, mainSystem: Number(fields[12]) / ticks };
  } catch {
    return null;
  }
}

/** `after` less `before`, a unit of work's µs (`units` of them), in words. */
export function cpuSplitWords(before: CpuSplit, after: CpuSplit, units: number): string {
  const us = (seconds: number) => ((seconds * 1e6) / units).toFixed(0);
  const user = after.mainUser - before.mainUser;
  const system = after.mainSystem - before.mainSystem;
  return (
    `main thread ${us(user + system)} (user ${us(user)}, system ${us(system)}), ` +
    `other threads ${us(after.total - before.total - user - system)}`
  );
}

/** The pids of a process's children (`/proc/<pid>/task/*\/children`), or none. */
export function childPids(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((task) =>
      readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8')
        .split(' ')
        .filter(Boolean)
        .map(Number),
    );
  } catch {
    return [];
  }
}

/** Sends the signal to a process and its children; ones that have ended are skipped. */
function signalTree(pid: number, signal: NodeJS.Signals): void {
  for (const target of [pid, ...childPids(pid)]) {
    try {
      process.kill(target, signal);
    } catch {
      // ended meanwhile
    }
  }
}

/**
 * CPU seconds of a process and its living children (the API processes of `serve --processes N`
 * are the primary's children). A child that exits between two readings takes its time with it.
 */
function treeCpuSeconds(pid: number): number | null {
  const own = processCpuSeconds(pid);
  if (own === null) return null;
  return childPids(pid).reduce((sum, child) => sum + (processCpuSeconds(child) ?? 0), own);
}

/**
 * CPU seconds used so far by each process whose command name is `name` (e.g. the PostgreSQL
 * backends), by pid: a sum alone would go down when a process exits.
 */
export function commandCpuSeconds(name: string): Map<number, number> | null {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return null;
  }
  const byPid = new Map<number, number>();
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      if (comm !== name && !comm.startsWith(`${name}:`)) continue;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      byPid.set(Number(entry), (Number(fields[11]) + Number(fields[12])) / ticksPerSecond());
    } catch {
      // the process ended between readdir and read
    }
  }
  return byPid.size > 0 ? byPid : null;
}

/**
 * CPU seconds the processes used between two `commandCpuSeconds` snapshots: processes that started
 * in between count whole, processes that ended in between are lost (an undercount, never negative).
 */
export function commandCpuDelta(
  before: Map<number, number> | null,
  after: Map<number, number> | null,
): number | null {
  if (!after) return before ? 0 : null;
  let total = 0;
  for (const [pid, seconds] of after) total += Math.max(0, seconds - (before?.get(pid) ?? 0));
  return total;
}

/** Whole-machine CPU: busy and total jiffies from /proc/stat. */
export function systemCpu(): { busy: number; total: number } | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
    const values = line.trim().split(/\s+/).slice(1).map(Number);
    const total = values.slice(0, 8).reduce((a, b) => a + b, 0);
    const idle = values[3] + (values[4] ?? 0);
    return { busy: total - idle, total };
  } catch {
    return null;
  }
}

export interface ServerProcess {
  name: string;
  pid: number;
  port: number;
  baseUrl: string;
  /** The tail of the child's stderr (start-up errors, warnings). */
  stderrTail(): string;
  /** The process's CPU time with its children's (a cluster's API processes). */
  cpuSeconds(): number | null;
  /** Records a CPU profile of the child between these two calls (see child-agent.ts). */
  startCpuProfile(): Promise<void>;
  stopCpuProfile(file: string): Promise<void>;
  /** Runs the worker's retention purge now (BENCH_RETENTION=manual); resolves with its report. */
  retentionPurge(timeoutMs: number): Promise<unknown>;
  /** The mark-compacts the child has run since it started (its main process only). */
  markCompacts(): Promise<number>;
  /**
   * Stops the process and its children (SIGSTOP) until `resume`, so a window measuring another
   * server shares the cores with none of it.
   */
  pause(): void;
  resume(): void;
  stop(): Promise<void>;
}

export interface StartOptions {
  name: string;
  /** Entry point, relative to the repository root. */
  entry: string;
  /** Arguments after the entry point (`serve --processes 2` for bin/tourops.js). */
  args?: string[];
  env: Record<string, string>;
  /** Extra node flags. */
  nodeArgs?: string[];
  readyPath?: string;
  readyTimeoutMs?: number;
  /** The variable that tells the child its port (default PORT; a worker's WORKER_METRICS_PORT). */
  portEnv?: string;
}

/** Environment variables the children inherit; everything else comes from the benchmark. */
const INHERITED = ['PATH', 'HOME', 'TMPDIR', 'LANG', 'TZ'];

export async function startServer(options: StartOptions): Promise<ServerProcess> {
  const port = await freePort();
  const env: Record<string, string> = {};
  for (const name of INHERITED) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  Object.assign(env, options.env, { [options.portEnv ?? 'PORT']: String(port), HOST: '127.0.0.1' });

  const child = spawn(
    process.execPath,
    [
      ...(options.nodeArgs ?? []),
      '--import',
      'tsx',
      '--import',
      AGENT,
      options.entry,
      ...(options.args ?? []),
    ],
    { cwd: REPO_ROOT, env, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] },
  );
  live.add(child);
  let stderr = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  let exited: { code: number | null; signal: string | null } | null = null;
  const exitPromise = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      exited = { code, signal };
      live.delete(child);
      resolve();
    });
  });
  child.on('error', () => {
    // reported through 'exit' / the readiness timeout
  });

  const baseUrl = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + (options.readyTimeoutMs ?? 60_000);
  for (;;) {
    if (exited) {
      throw new Error(
        `${options.name}: server exited during start-up (${JSON.stringify(exited)})\n${stderr}`,
      );
    }
    try {
      const response = await fetch(`${baseUrl}${options.readyPath ?? '/healthz'}`, {
        signal: AbortSignal.timeout(1000),
      });
      await response.arrayBuffer();
      if (response.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(
        `${options.name}: server not ready after ${options.readyTimeoutMs ?? 60_000} ms\n${stderr}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }

  const waitForMessage = (type: string, timeoutMs: number) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.off('message', onMessage);
        reject(new Error(`${options.name}: no ${type} from the child within ${timeoutMs} ms`));
      }, timeoutMs);
      const onMessage = (message: { type?: string; message?: string }) => {
        if (message?.type === 'agent-error') {
          clearTimeout(timer);
          child.off('message', onMessage);
          reject(new Error(`${options.name}: ${message.message}`));
        } else if (message?.type === type) {
          clearTimeout(timer);
          child.off('message', onMessage);
          resolve(message);
        }
      };
      child.on('message', onMessage);
    });

  return {
    name: options.name,
    pid: child.pid as number,
    port,
    baseUrl,
    stderrTail: () => stderr,
    cpuSeconds: () => treeCpuSeconds(child.pid as number),
    async startCpuProfile() {
      const started = waitForMessage('cpu-profile-started', 10_000);
      child.send({ type: 'cpu-profile-start', intervalUs: 200 });
      await started;
    },
    async stopCpuProfile(file: string) {
      const written = waitForMessage('cpu-profile-written', 30_000);
      child.send({ type: 'cpu-profile-stop', file });
      await written;
    },
    async markCompacts() {
      const answered = waitForMessage('gc-stats', 10_000);
      child.send({ type: 'gc-stats' });
      return (await answered).markCompacts as number;
    },
    async retentionPurge(timeoutMs: number) {
      const purged = waitForMessage('retention-purged', timeoutMs);
      child.send({ type: 'retention-purge' });
      return (await purged).report;
    },
    pause() {
      signalTree(child.pid as number, 'SIGSTOP');
    },
    resume() {
      signalTree(child.pid as number, 'SIGCONT');
    },
    async stop() {
      if (exited) return;
      signalTree(child.pid as number, 'SIGCONT');
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exitPromise;
      clearTimeout(timer);
    },
  };
}
