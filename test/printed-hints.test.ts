import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import { reaped } from './helpers/children.ts';
import { BACKENDS, createTestDatabase, type TestDatabase } from './helpers/context.ts';
import { npmStart, outputOf, ROOT, runShell, untilOutput } from './helpers/processes.ts';

for (const backend of BACKENDS) {
  describe(`the commands npm start prints run as printed (${backend})`, () => {
    let database: TestDatabase;
    before(async () => {
      database = await createTestDatabase(backend);
    });
    after(() => database.drop());

    it('the curl line of the first start, then the token hint of the next one', async () => {
      const first = await npmStart(database.env);
      try {
        // The public URL is where it listens: one address.
        assert.match(first.banner, /listening on http:\/\/localhost:\d+ \(/);
        const curl = first.banner.split('\n').find((line) => line.trim().startsWith('curl '));
        assert.ok(curl, first.banner);
        const answer = JSON.parse(runShell(curl.trim()));
        assert.equal(answer.data.length, 2);
      } finally {
        await first.stop();
      }
      // Not empty now: the banner says how to mint a token, for this database.
      // Behind a balancer the public URL is elsewhere: the banner names where this node listens.
      const second = await npmStart({ ...database.env, PUBLIC_BASE_URL: 'http://127.0.0.1:8080' });
      try {
        const port = new URL(second.baseUrl).port;
        assert.match(
          second.banner,
          new RegExp(
            `listening on http://127\\.0\\.0\\.1:${port} \\(public URL http://127\\.0\\.0\\.1:8080\\)`,
          ),
        );
        const hint = /Mint a token with: (.+)$/m.exec(second.banner)?.[1];
        assert.ok(hint, second.banner);
        // In the directory of the repository, with none of the server's variables: the hint
        // carries what reaches the same database, and minting needs no SECRET_KEY.
        const minted = runShell(hint);
        assert.match(minted, /minted for tenant "demo"/);
        assert.match(minted, /tk_test_[0-9A-Z]{26}/);
      } finally {
        await second.stop();
      }
    });
  });
}

for (const backend of BACKENDS) {
  describe(`the examples of tourops --help run as printed (${backend})`, () => {
    let database: TestDatabase;
    before(async () => {
      database = await createTestDatabase(backend);
    });
    after(() => database.drop());

    it('each one, in order, in the environment of a served database', async () => {
      const help = runShell('node bin/tourops.js --help');
      const examples = (/\nExamples:\n((?: {2}.+\n)+)/.exec(help)?.[1] ?? '')
        .split('\n')
        .map((line) => line.trim())
        .filter((line) => line !== '');
      assert.ok(examples.length >= 3, help);
      // The tenant "demo" that `npm start` seeds, which the examples name.
      runShell('node bin/tourops.js demo', database.env);
      for (const example of examples) {
        if (example.startsWith('npx tourops listen ')) {
          // npx itself dies of the Ctrl-C, as it does in a terminal; the command stopped cleanly.
          const output = await runUntilInterrupted(example, database.env, 'Signing key:');
          assert.match(output, /Stopped after forwarding 0 event\(s\)\./);
        } else {
          runShell(example, database.env);
        }
      }
      const tenants = JSON.parse(runShell('node bin/tourops.js tenant list --json', database.env));
      assert.ok(tenants.some((tenant: { slug: string }) => tenant.slug === 'acme'));
    });
  });
}

/**
 * A command that runs until interrupted, started as a terminal would (a process group of its
 * own), then Ctrl-C'd once it printed `ready`: its whole output.
 */
async function runUntilInterrupted(line: string, env: Record<string, string>, ready: string) {
  const child = reaped(
    spawn('sh', ['-c', `exec ${line}`], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    }),
    { group: true },
  );
  const output = outputOf(child);
  const exited = once(child, 'close');
  await untilOutput(child, output, ready, () => process.kill(-(child.pid as number), 'SIGKILL'));
  process.kill(-(child.pid as number), 'SIGINT');
  await exited;
  return output();
}
