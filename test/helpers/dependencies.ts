import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort, processCpuSeconds } from '../../bench/processes.ts';
import { reaped } from './children.ts';

/** The PostgreSQL server binaries of this machine, or null where there are none. */
export function postgresBin(): string | null {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const versions = readdirSync(root).sort((a, b) => Number(b) - Number(a));
  for (const version of versions) {
    const bin = join(root, version, 'bin');
    if (existsSync(join(bin, 'initdb'))) return bin;
  }
  return null;
}

function userIds(name: string): { uid: number; gid: number } {
  const uid = Number(execFileSync('id', ['-u', name], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', name], { encoding: 'utf8' }).trim());
  return { uid, gid };
}

/**
 * A throwaway PostgreSQL cluster of our own on a free loopback port, in a temp directory, run as
 * the `postgres` user: fault tests freeze and stop it, never the shared server on 5432.
 */
export class PgCluster {
  private constructor(
    private readonly bin: string,
    private readonly dir: string,
    readonly port: number,
    private readonly settings: Record<string, string>,
  ) {}

  /**
   * `settings`: server settings over the fault tests' defaults (fsync off, 50 connections); the
   * capacity bench runs a durable server with pg_stat_statements.
   */
  static async start(settings: Record<string, string> = {}): Promise<PgCluster> {
    const bin = postgresBin();
    if (!bin) throw new Error('no PostgreSQL server binaries');
    const dir = mkdtempSync(join(tmpdir(), 'tourops-pg-'));
    const { uid, gid } = userIds('postgres');
    chownSync(dir, uid, gid);
    const cluster = new PgCluster(bin, dir, await freePort(), {
      fsync: 'off',
      max_connections: '50',
      ...settings,
    });
    cluster.asPostgres('initdb', [
      '-D',
      cluster.data,
      '-A',
      'trust',
      '-U',
      'postgres',
      '-E',
      'UTF8',
      '--no-sync',
    ]);
    cluster.startServer();
    return cluster;
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  private get data(): string {
    return join(this.dir, 'data');
  }

  private asPostgres(command: string, args: string[]): void {
    execFileSync('runuser', ['-u', 'postgres', '--', join(this.bin, command), ...args], {
      stdio: 'pipe',
      timeout: 60_000,
    });
  }

  /** Starts (again) the server and waits until it accepts connections. */
  startServer(): void {
    const settings = Object.entries(this.settings).map(([name, value]) => `-c ${name}=${value}`);
    const options = [
      `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1`,
      ...settings,
    ].join(' ');
    this.asPostgres('pg_ctl', [
      '-D',
      this.data,
      '-o',
      options,
      '-l',
      join(this.dir, 'log'),
      '-w',
      'start',
    ]);
  }

  /**
   * CPU seconds the whole server has used: the postmaster's own and its reaped children's (the
   * backends of closed connections: /proc's cutime and cstime), plus its living children's.
   */
  cpuSeconds(): number {
    const [postmaster, ...children] = this.pids();
    // A backend that ends after the postmaster's reading and before its own is missed (an
    // undercount of one reading, as commandCpuDelta's).
    return children.reduce(
      (sum, child) => sum + (processCpuSeconds(child) ?? 0),
      processCpuSeconds(postmaster, true) ?? 0,
    );
  }

  /** Every process of the server: the postmaster and its children. */
  private pids(): number[] {
    const postmaster = Number(
      readFileSync(join(this.data, 'postmaster.pid'), 'utf8').split('\n')[0],
    );
    let children: number[] = [];
    try {
      children = execFileSync('pgrep', ['-P', String(postmaster)], { encoding: 'utf8' })
        .split('\n')
        .filter(Boolean)
        .map(Number);
    } catch {
      // No children.
    }
    return [postmaster, ...children];
  }

  /** SIGSTOP to every server process: connections stay open, nothing answers. */
  freeze(): void {
    this.signal('SIGSTOP');
  }

  thaw(): void {
    this.signal('SIGCONT');
  }

  /** A backend that exited between listing and signalling (a closed connection) is skipped. */
  private signal(signal: NodeJS.Signals): void {
    for (const pid of this.pids()) {
      try {
        process.kill(pid, signal);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
      }
    }
  }

  /** Stopped for real: the server exits at once, connections are cut. */
  stopServer(): void {
    this.asPostgres('pg_ctl', ['-D', this.data, '-m', 'immediate', '-w', 'stop']);
  }

  destroy(): void {
    try {
      this.thaw();
    } catch {
      // Not running.
    }
    try {
      this.stopServer();
    } catch {
      // Not running.
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A redis-server of our own on a free loopback port, keeping nothing on disk. */
export class RedisServer {
  private constructor(
    private child: ChildProcess,
    readonly port: number,
  ) {}

  static async start(): Promise<RedisServer> {
    const port = await freePort();
    const server = new RedisServer(RedisServer.spawn(port), port);
    for (let i = 0; i < 100; i++) {
      if (server.ping()) return server;
      await sleep(50);
    }
    server.kill();
    throw new Error('redis-server did not start');
  }

  private static spawn(port: number): ChildProcess {
    return reaped(
      spawn(
        'redis-server',
        ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
        { stdio: 'ignore' },
      ),
    );
  }

  /** Killed (if running) and started again on the same port, empty: it keeps nothing. */
  async restart(): Promise<void> {
    this.kill();
    await new Promise((resolve) => this.child.once('exit', resolve));
    this.child = RedisServer.spawn(this.port);
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  ping(): boolean {
    try {
      return (
        execFileSync('redis-cli', ['-p', String(this.port), 'ping'], {
          encoding: 'utf8',
          timeout: 1_000,
        }).trim() === 'PONG'
      );
    } catch {
      return false;
    }
  }

  /** Keys matching `pattern` (redis-cli --scan). */
  keys(pattern: string): string[] {
    return execFileSync('redis-cli', ['-p', String(this.port), '--scan', '--pattern', pattern], {
      encoding: 'utf8',
      timeout: 2_000,
    })
      .split('\n')
      .filter(Boolean);
  }

  freeze(): void {
    this.child.kill('SIGSTOP');
  }

  thaw(): void {
    this.child.kill('SIGCONT');
  }

  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGCONT');
      this.child.kill('SIGKILL');
    }
  }
}
