import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { runCli } from '../../src/cli/run.ts';
import { reaped } from './children.ts';
import { BIN, ROOT } from './processes.ts';
import { HUNG_AFTER_MS } from './until.ts';

/** What one `tourops` command printed, and its exit code. */
export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A command line as the tests write it: an argv, or a string split on spaces. */
const argvOf = (args: string | string[]): string[] =>
  typeof args === 'string' ? args.split(' ').filter((arg) => arg !== '') : args;

/**
 * `tourops <args>` in this process: runCli over the argv, the environment (PATH and `env` only, so
 * nothing of the developer's shell leaks in) and collected output, as bin/tourops.js runs it after
 * its set-up. test/cli.test.ts runs the binary itself; elsewhere a process per command would only
 * load the same modules again.
 */
export async function cliHere(
  args: string | string[],
  env: Record<string, string>,
): Promise<CliResult> {
  const argv = argvOf(args);
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, {
    stdout: { write: (chunk: string) => (stdout += chunk) },
    stderr: { write: (chunk: string) => (stderr += chunk) },
    env: { PATH: process.env.PATH ?? '', ...env },
  });
  if (code === 'serving') throw new Error(`tourops ${argv.join(' ')} is not a one-shot command`);
  return { code, stdout, stderr };
}

/** `tourops <args>` as its own process (bin/tourops.js), with only PATH and `env`. */
export async function tourops(
  args: string | string[],
  env: Record<string, string>,
): Promise<CliResult> {
  const child = reaped(
    spawn(process.execPath, [BIN, ...argvOf(args)], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), HUNG_AFTER_MS);
  const [code] = (await once(child, 'close')) as [number | null];
  clearTimeout(timer);
  return { code, stdout, stderr };
}
