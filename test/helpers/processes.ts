import assert from 'node:assert/strict';
import {
  type ChildProcess,
  type ChildProcessWithoutNullStreams,
  execFileSync,
  spawn,
} from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../bench/processes.ts';
import { reaped } from './children.ts';
import { HUNG_AFTER_MS, until } from './until.ts';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const BIN = fileURLToPath(new URL('../../bin/tourops.js', import.meta.url));

/** A `tourops` child process (an API server or a worker), as an operator would run it. */
export interface ChildService {
  readonly child: ChildProcessWithoutNullStreams;
  /** http://127.0.0.1:<port> for servers. */
  readonly baseUrl: string;
  output(): string;
  /** Its JSON log lines so far, parsed (the lines of `output` that are records). */
  logRecords<T = Record<string, unknown>>(): T[];
  /** SIGTERM (or `signal`), then the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Starts `tourops <args>` with `env` (plus PATH) and waits until its output contains `ready`
 * (the server's "listening on"), failing if it exits first or hangs (HUNG_AFTER_MS). `root`:
 * another checkout's (a previous release's) tourops instead of this one.
 */
export async function startTourops(
  args: string[],
  env: Record<string, string>,
  ready = 'listening on',
  root = ROOT,
): Promise<ChildService> {
  const port = await freePort();
  const child = reaped(
    spawn(process.execPath, [join(root, 'bin', 'tourops.js'), ...args], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', PORT: String(port), ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    }),
  );
  let output = '';
  const exited = once(child, 'close') as Promise<[number | null]>;
  await new Promise<void>((resolve, reject) => {
    // Not ready: stopped before failing (SIGTERM: a cluster's primary stops its processes too),
    // so a slow start leaves nothing behind.
    const timer = setTimeout(() => {
      child.kill('SIGTERM');
      reject(new Error(`not ready in ${HUNG_AFTER_MS} ms:\n${output}`));
    }, HUNG_AFTER_MS);
    const collect = (chunk: string) => {
      output += chunk;
      if (output.includes(ready)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout.setEncoding('utf8').on('data', collect);
    child.stderr.setEncoding('utf8').on('data', collect);
    child.on('close', () => {
      clearTimeout(timer);
      reject(new Error(`tourops ${args.join(' ')} exited early:\n${output}`));
    });
  });
  return {
    child,
    baseUrl: `http://127.0.0.1:${port}`,
    output: () => output,
    // Whole lines only: the last one is still being written unless the output ends a line.
    logRecords: <T>() =>
      output
        .split('\n')
        .slice(0, -1)
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as T),
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const [code] = await exited;
      return code;
    },
  };
}

/** One HTTP request to a child server: status, headers and body text. */
export async function callService(
  server: ChildService,
  method: string,
  path: string,
  token: string,
  body?: unknown,
  headers: Record<string, string> = {},
) {
  const response = await fetch(`${server.baseUrl}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, headers: response.headers, text: await response.text() };
}

/**
 * A tenant made through `server`'s admin API (its ADMIN_API_TOKEN is `adminToken`), and a token
 * with every scope for it minted through `tokenServer` (the same server unless given).
 */
export async function adminTenantToken(
  server: ChildService,
  adminToken: string,
  tenant: { name: string; slug: string; tier: string },
  tokenServer: ChildService = server,
): Promise<{ tenantId: string; token: string }> {
  const created = await callService(server, 'POST', '/admin/v1/tenants', adminToken, tenant);
  assert.equal(created.status, 201, created.text);
  const tenantId = JSON.parse(created.text).data.id as string;
  const minted = await callService(
    tokenServer,
    'POST',
    `/admin/v1/tenants/${tenantId}/tokens`,
    adminToken,
    { scopes: ['*'], name: `${tenant.slug} test` },
  );
  assert.equal(minted.status, 201, minted.text);
  return { tenantId, token: JSON.parse(minted.text).token as string };
}

/** Everything a child process wrote on stdout and stderr so far, as one text. */
export function outputOf(child: ChildProcess): () => string {
  let output = '';
  const collect = (chunk: string) => {
    output += chunk;
  };
  child.stdout?.setEncoding('utf8').on('data', collect);
  child.stderr?.setEncoding('utf8').on('data', collect);
  return () => output;
}

/**
 * Waits until `output` (see outputOf) holds `text`. Fails, with the output so far, when the child
 * exits first or HUNG_AFTER_MS passes; a child still running is then stopped with `kill`
 * (default: SIGKILL to it).
 */
export async function untilOutput(
  child: ChildProcess,
  output: () => string,
  text: string,
  kill: () => void = () => child.kill('SIGKILL'),
): Promise<void> {
  const exited = () => child.exitCode !== null || child.signalCode !== null;
  try {
    await until(
      () => {
        if (output().includes(text)) return true;
        if (exited()) throw new Error(`no "${text}" before it exited`);
        return undefined;
      },
      `no "${text}"`,
      50,
    );
  } catch (error) {
    if (!exited()) kill();
    throw new Error(`${(error as Error).message}:\n${output()}`);
  }
}

/** `npm start`'s entry with `env`, until its banner is out; the banner, and a way to stop it. */
export async function npmStart(env: Record<string, string>) {
  const port = await freePort();
  const child: ChildProcess = reaped(
    spawn(process.execPath, ['bin/start.js'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', PORT: String(port), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  const output = outputOf(child);
  await untilOutput(child, output, 'OpenAPI document:');
  return {
    banner: output(),
    baseUrl: `http://127.0.0.1:${port}`,
    output,
    stop: async () => {
      child.kill('SIGTERM');
      if (child.exitCode === null) await once(child, 'exit');
    },
  };
}

/**
 * Runs `script` as a shell would, pasted from a README or a printed hint, from the repository
 * (where `npx tourops` is), stopping at the first command that fails; its standard output. Killed
 * only once it has hung (HUNG_AFTER_MS).
 */
export function runShell(script: string, env: Record<string, string> = {}): string {
  return execFileSync('sh', ['-ec', script], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
    encoding: 'utf8',
    timeout: HUNG_AFTER_MS,
  });
}
