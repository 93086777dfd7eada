import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import { freePort } from '../bench/processes.ts';
import { BACKENDS, createTestDatabase, type TestDatabase } from './helpers/context.ts';
import { ROOT } from './helpers/processes.ts';

/** `npm start`'s entry with `env`, until its banner is out; the banner, and a way to stop it. */
async function npmStart(env: Record<string, string>) {
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', PORT: String(port), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
  });
  const deadline = Date.now() + 30_000;
  while (!output.includes('OpenAPI document:')) {
    if (Date.now() > deadline || child.exitCode !== null) {
      child.kill('SIGKILL');
      throw new Error(`no banner:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    banner: output,
    stop: async () => {
      child.kill('SIGTERM');
      if (child.exitCode === null) await once(child, 'exit');
    },
  };
}

/** Runs a printed command line as a shell would, from the repository (where `npx tourops` is). */
function runPrinted(line: string, env: Record<string, string> = {}): string {
  return execFileSync('sh', ['-c', line], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
}

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
        const curl = first.banner.split('\n').find((line) => line.trim().startsWith('curl '));
        assert.ok(curl, first.banner);
        const answer = JSON.parse(runPrinted(curl.trim()));
        assert.equal(answer.data.length, 2);
      } finally {
        await first.stop();
      }
      // Not empty now: the banner says how to mint a token, for this database.
      const second = await npmStart(database.env);
      try {
        const hint = /Mint a token with: (.+)$/m.exec(second.banner)?.[1];
        assert.ok(hint, second.banner);
        // In the directory of the repository, with none of the server's variables: the hint
        // carries what reaches the same database, and minting needs no SECRET_KEY.
        const minted = runPrinted(hint);
        assert.match(minted, /minted for tenant "demo"/);
        assert.match(minted, /tk_test_[0-9A-Z]{26}/);
      } finally {
        await second.stop();
      }
    });
  });
}
