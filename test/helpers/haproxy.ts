import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../bench/processes.ts';
import { reaped } from './children.ts';
import { outputOf, ROOT } from './processes.ts';

/** deploy/haproxy.cfg, the configuration operators are given. */
export const DEPLOY_CONFIG = readFileSync(join(ROOT, 'deploy', 'haproxy.cfg'), 'utf8');

/** Replaces `from` in `text`, which must hold it exactly once (the file changed shape: say so). */
export function replaceOnce(text: string, from: string | RegExp, to: string): string {
  const count =
    typeof from === 'string'
      ? text.split(from).length - 1
      : (text.match(new RegExp(from.source, `${from.flags.replace('g', '')}g`)) ?? []).length;
  if (count !== 1) throw new Error(`deploy/haproxy.cfg: expected one "${from}", found ${count}`);
  return text.replace(from, to);
}

/** One row of HAProxy's `show stat` CSV, by column name (pxname, svname, status, wretr…). */
export type StatRow = Record<string, string>;

/**
 * Debian's `haproxy` in the foreground (`-db`) with `config`, whose stats socket is expected at
 * `{{stats}}` and frontend bind at `{{bind}}` (filled in here). Stopped by its pid.
 */
export async function startHaproxy(config: string): Promise<{
  port: number;
  /** The stats socket's path (`/run/haproxy/tourops.sock` in deploy/haproxy.cfg). */
  socket: string;
  stats(): Promise<StatRow[]>;
  command(line: string): Promise<string>;
  output(): string;
  stop(): Promise<void>;
}> {
  if (spawnSync('haproxy', ['-v']).error) {
    throw new Error('haproxy is not installed: apt-get install haproxy (.ci/run installs it)');
  }
  const dir = mkdtempSync(join(tmpdir(), 'tourops-haproxy-'));
  const port = await freePort();
  const socket = join(dir, 'stats.sock');
  const file = join(dir, 'haproxy.cfg');
  writeFileSync(
    file,
    config.replaceAll('{{stats}}', socket).replaceAll('{{bind}}', `127.0.0.1:${port}`),
  );
  const check = spawnSync('haproxy', ['-c', '-q', '-f', file], { encoding: 'utf8' });
  if (check.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`haproxy -c: ${check.stdout}${check.stderr}`);
  }
  const child: ChildProcess = reaped(
    spawn('haproxy', ['-db', '-f', file], {
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  const output = outputOf(child);
  /** One command on the stats socket (`level admin`), its answer. */
  const command = (line: string) =>
    new Promise<string>((resolve, reject) => {
      let text = '';
      const conn = connect(socket, () => conn.write(`${line}\n`));
      conn.setEncoding('utf8').on('data', (chunk: string) => {
        text += chunk;
      });
      conn.on('error', reject);
      conn.on('end', () => resolve(text));
    });
  const stats = async (): Promise<StatRow[]> => {
    const [header, ...lines] = (await command('show stat')).trim().split('\n');
    const names = header.replace(/^# /, '').split(',');
    return lines.map((line) => Object.fromEntries(line.split(',').map((v, i) => [names[i], v])));
  };
  // Ready once its socket answers.
  for (let i = 0; ; i++) {
    try {
      await stats();
      break;
    } catch (error) {
      if (child.exitCode !== null || i > 100) {
        child.kill('SIGKILL');
        rmSync(dir, { recursive: true, force: true });
        throw new Error(`haproxy did not start: ${output()} ${error}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  return {
    port,
    socket,
    stats,
    command,
    output,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await once(child, 'exit');
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
