import { runCli } from './run.ts';

/** `tourops` (bin/tourops.js): the operator CLI over the process's own argv, env and streams. */
const outcome = await runCli(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
});

if (outcome === 0) {
  // Everything is closed: the process ends on its own once stdout has drained.
  process.exitCode = 0;
} else if (outcome !== 'serving') {
  // A failure may leave a half-open runtime behind (a server that could not listen); do not wait on it.
  process.stdout.write('', () => process.stderr.write('', () => process.exit(outcome)));
}
