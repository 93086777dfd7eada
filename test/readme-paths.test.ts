import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { freePort } from '../bench/processes.ts';
import { reaped } from './helpers/children.ts';
import { BACKENDS, createTestDatabase, type TestDatabase } from './helpers/context.ts';
import { npmStart, outputOf, ROOT, runShell, untilOutput } from './helpers/processes.ts';

// The README's newcomer paths, pasted as written into a shell against a fresh database: only the
// port (3000 and 4242 here are free ports) and the certificate's directory are changed.

const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

/** The `nth` sh block of the README section under `heading`, its lines joined at `\`. */
function readmeBlock(heading: string, nth = 0): string[] {
  const section = README.split(`\n${heading}\n`)[1]?.split('\n## ')[0] ?? '';
  const block = section.split('```sh\n')[nth + 1]?.split('\n```')[0];
  assert.ok(block, `README: no sh block ${nth} under "${heading}"`);
  return block.replaceAll('\\\n', '').split('\n');
}

const line = (lines: string[], pattern: RegExp) => {
  const found = lines.find((candidate) => pattern.test(candidate));
  assert.ok(found, `README: no line matching ${pattern}`);
  return found;
};

/** Leading `NAME=value` words of a command line, as an environment. */
const assignments = (command: string): Record<string, string> =>
  Object.fromEntries(
    command
      .trim()
      .split(/\s+/)
      .filter((word) => /^\w+=/.test(word))
      .map((word) => [word.slice(0, word.indexOf('=')), word.slice(word.indexOf('=') + 1)]),
  );

/** The README's lines in a shell (see runShell). */
const sh = (script: string, env: Record<string, string> = {}) => runShell(script, env);

for (const backend of BACKENDS) {
  describe(`the README's paths, pasted (${backend})`, () => {
    // Each path from a fresh database, as a newcomer meets it.
    let database: TestDatabase;
    beforeEach(async () => {
      database = await createTestDatabase(backend);
    });
    afterEach(() => database.drop());

    it('"Your own tenant": a trip published, a booking confirmed, booking.confirmed verified', async () => {
      const lines = readmeBlock('## Your own tenant');
      const adminToken = /export ADMIN_API_TOKEN=(\S+)/.exec(line(lines, /ADMIN_API_TOKEN=/))?.[1];
      assert.ok(adminToken && adminToken.length >= 32);
      const server = await npmStart({ ...database.env, ADMIN_API_TOKEN: adminToken });
      const receiverPort = String(await freePort());
      const started: ChildProcess[] = [];
      /** A line of the README in a process group of its own, as in a terminal. */
      const terminal = (command: string, env: Record<string, string>) => {
        const child = reaped(
          spawn('sh', ['-c', command], {
            cwd: ROOT,
            env: { PATH: process.env.PATH ?? '', ...env },
            stdio: ['ignore', 'pipe', 'pipe'],
            detached: true,
          }),
          { group: true },
        );
        started.push(child);
        return { child, output: outputOf(child) };
      };
      try {
        assert.match(server.banner, /Admin API: http:\/\/localhost:\d+\/admin\/docs\//);
        const local = (text: string) => text.replaceAll('http://localhost:3000', server.baseUrl);
        // Up to the trip, then its variables printed: `listen` starts before the booking's lines.
        const publish = lines.findIndex((candidate) => /\/publish/.test(candidate));
        const setup = [...lines.slice(0, publish), 'printf "%s\\n" "$TRIP"'].join('\n');
        const trip = sh(local(setup)).trim();
        assert.match(trip, /^trp_/);

        const laptop = readmeBlock('## Receive webhooks on your laptop').map((command) =>
          command.replaceAll('4242', receiverPort),
        );
        const listenLine = line(laptop, /tourops listen/).replace('--tenant demo', '--tenant sol');
        const listen = terminal(listenLine, database.env);
        await untilOutput(listen.child, listen.output, 'Signing key: ');
        const key = /Signing key: (whsec_\S+)/.exec(listen.output())?.[1];
        assert.ok(key, listen.output());
        const receiver = terminal(line(laptop, /receiver\.mjs/).replace('whsec_…', key), {
          PORT: receiverPort,
        });
        await untilOutput(receiver.child, receiver.output, 'listening on ');

        const rest = [...lines.slice(0, 2), ...lines.slice(publish)].join('\n');
        const output = sh(local(rest), { TRIP: trip });
        const [slug, ...moves] = output.trim().split('\n');
        assert.match(slug, /^lisbon-in-spring-/, output);
        assert.deepEqual(moves, ['deposit_paid', 'confirmed'], output);
        await untilOutput(receiver.child, receiver.output, 'verified booking.confirmed ');
      } finally {
        for (const child of started) {
          if (child.pid === undefined || child.exitCode !== null) continue;
          const exited = once(child, 'exit');
          process.kill(-child.pid, 'SIGTERM');
          await exited;
        }
        await server.stop();
      }
    });

    it('"Receive webhooks on your laptop": a certificate of ones own, a real HTTPS delivery', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'tourops-readme-tls-'));
      const receiverPort = await freePort();
      const local = (command: string) =>
        command
          .replaceAll('cert.pem', join(dir, 'cert.pem'))
          .replaceAll('key.pem', join(dir, 'key.pem'))
          .replaceAll('4242', String(receiverPort));
      const recipe = readmeBlock('## Receive webhooks on your laptop', 1).map(local);
      let receiver: ChildProcess | null = null;
      let server: Awaited<ReturnType<typeof npmStart>> | null = null;
      try {
        sh(line(recipe, /^openssl req /));
        server = await npmStart({
          ...database.env,
          ...assignments(line(recipe, /npm start/).split('npm start')[0]),
        });
        const token = /Bearer (tk_test_[^\s"]+)/.exec(server.banner)?.[1];
        assert.ok(token, server.banner);
        const withServer = (command: string) =>
          command.replaceAll('http://localhost:3000', server?.baseUrl ?? '');
        const signingKey = sh(withServer(line(recipe, /\/api\/v1\/webhooks/)), {
          TOKEN: token,
        }).trim();
        assert.match(signingKey, /^whsec_/);

        const receiverLine = line(recipe, /receiver\.mjs/).replace('whsec_…', signingKey);
        // A process group of its own, as in a terminal: the shell and the node it starts stop together.
        receiver = reaped(
          spawn('sh', ['-c', receiverLine], {
            cwd: ROOT,
            env: { PATH: process.env.PATH ?? '', PORT: String(receiverPort) },
            stdio: ['ignore', 'pipe', 'pipe'],
            detached: true,
          }),
          { group: true },
        );
        const received = outputOf(receiver);
        await untilOutput(receiver, received, 'listening on https://');

        const createClient = line(readmeBlock('## Receive webhooks on your laptop'), /^curl /);
        sh(withServer(createClient), { TOKEN: token });
        await untilOutput(receiver, received, 'verified client.created ');
      } finally {
        if (receiver?.pid !== undefined && receiver.exitCode === null) {
          const exited = once(receiver, 'exit');
          process.kill(-receiver.pid, 'SIGTERM');
          await exited;
        }
        await server?.stop();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}
