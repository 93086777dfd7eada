import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../bench/processes.ts';
import { BIN, type ChildService, ROOT, startTourops } from './helpers/processes.ts';

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tourops-life-'));
  dirs.push(dir);
  return dir;
}
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/**
 * A keep-alive client that sends its next request as soon as the last answer is in, on one
 * socket, until the server answers with `Connection: close` or the socket ends. Counts requests
 * that were written and never answered.
 */
function keepSending(port: number) {
  const socket = connect(port, '127.0.0.1');
  let buffer = '';
  let pending = false;
  let answered = 0;
  let lost = 0;
  let closedByAnswer = false;
  let error: string | null = null;
  const send = () => {
    pending = true;
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  };
  socket.on('connect', send);
  socket.on('data', (chunk) => {
    buffer += chunk.toString('latin1');
    for (;;) {
      const end = buffer.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buffer.slice(0, end);
      const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
      if (buffer.length < end + 4 + length) return;
      buffer = buffer.slice(end + 4 + length);
      pending = false;
      answered += 1;
      if (/^connection: close/im.test(head)) {
        closedByAnswer = true;
        socket.end();
        return;
      }
      send();
    }
  });
  socket.on('error', (e: NodeJS.ErrnoException) => {
    error = e.code ?? e.message;
  });
  const closed = once(socket, 'close').then(() => {
    if (pending) lost += 1;
  });
  return {
    closed,
    result: () => ({ answered, lost, closedByAnswer, error }),
  };
}

describe('graceful stop (a real tourops serve)', () => {
  it('answers every request already on its way after SIGTERM, with Connection: close, and exits 0 at once', async () => {
    const server = await startTourops(['serve', '--no-worker'], { DATA_DIR: tempDir() });
    const port = Number(new URL(server.baseUrl).port);
    const clients = Array.from({ length: 8 }, () => keepSending(port));
    await sleep(500);
    const signalled = Date.now();
    const exit = server.stop('SIGTERM');
    await Promise.all(clients.map((client) => client.closed));
    const code = await exit;
    const elapsed = Date.now() - signalled;
    const results = clients.map((client) => client.result());
    for (const result of results) {
      assert.ok(
        result.answered > 5,
        `the client was served before the signal: ${JSON.stringify(result)}`,
      );
      assert.equal(
        result.lost,
        0,
        `a request written before the close was not answered: ${JSON.stringify(result)}`,
      );
      assert.equal(result.error, null, `no reset: ${JSON.stringify(result)}`);
      assert.ok(result.closedByAnswer, 'the last answer said Connection: close');
    }
    assert.equal(code, 0);
    assert.ok(elapsed < 5_000, `exited ${elapsed} ms after the signal`);
  });

  it('drains for SHUTDOWN_DRAIN: /readyz 503 at once, new connections still served, then exits 0', async () => {
    const drainMs = 1_500;
    const server = await startTourops(['serve', '--no-worker'], {
      DATA_DIR: tempDir(),
      SHUTDOWN_DRAIN: `${drainMs}ms`,
    });
    const port = Number(new URL(server.baseUrl).port);
    // Each probe on a connection of its own, as a balancer's health check and new clients come.
    const probe = (path: string) =>
      new Promise<
        { path: string; sentAt: number; status: number; body: string; close: boolean } | string
      >((resolve) => {
        const sentAt = Date.now();
        const request = httpGet({ port, host: '127.0.0.1', path, agent: false }, (response) => {
          let body = '';
          response.setEncoding('utf8').on('data', (chunk) => {
            body += chunk;
          });
          response.on('end', () =>
            resolve({
              path,
              sentAt,
              status: response.statusCode ?? 0,
              body,
              close: response.headers.connection === 'close',
            }),
          );
        });
        request.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'));
      });
    const ready = await probe('/readyz');
    assert.ok(typeof ready !== 'string' && ready.status === 200, JSON.stringify(ready));
    const signalled = Date.now();
    const exit = server.stop('SIGTERM');
    const answers: Array<Awaited<ReturnType<typeof probe>>> = [];
    let exited = false;
    void exit.then(() => {
      exited = true;
    });
    while (!exited && Date.now() - signalled < drainMs + 5_000) {
      answers.push(await probe(answers.length % 2 === 0 ? '/readyz' : '/healthz'));
      await sleep(5);
    }
    assert.equal(await exit, 0);
    const elapsed = Date.now() - signalled;
    assert.ok(elapsed >= drainMs, `exited ${elapsed} ms after the signal, before the drain ended`);
    const answered = answers.filter((a) => typeof a !== 'string');
    const firstDraining = answered.find(
      (a) => a.status === 503 && JSON.parse(a.body).status === 'draining',
    );
    assert.ok(firstDraining, 'readiness was withdrawn');
    assert.ok(
      firstDraining.sentAt - signalled <= 100,
      `the first 503 was asked ${firstDraining.sentAt - signalled} ms after the signal`,
    );
    for (const answer of answered.filter((a) => a.sentAt - signalled > 100)) {
      const expected = answer.path === '/readyz' ? 503 : 200;
      assert.equal(answer.status, expected, JSON.stringify(answer));
      if (answer.status === 503) assert.deepEqual(JSON.parse(answer.body), { status: 'draining' });
      assert.ok(answer.close, 'answers during the drain say Connection: close');
    }
    // Every connection opened during the drain was accepted and answered; only after it ended
    // may one be refused.
    const lastServed = Math.max(...answered.map((a) => a.sentAt)) - signalled;
    assert.ok(lastServed >= drainMs - 100, `the last answer was asked at ${lastServed} ms`);
    const refusedAt = answers.findIndex((a) => typeof a === 'string');
    if (refusedAt >= 0) {
      assert.ok(
        answers.slice(refusedAt).every((a) => typeof a === 'string'),
        'once refused, never served again',
      );
    }
    assert.ok(
      answered.filter((a) => a.sentAt - signalled > 100).length > 50,
      `probes answered during the drain: ${answered.length}`,
    );
  });

  it('closes idle keep-alive connections after a grace instead of waiting for their time-out', async () => {
    const server = await startTourops(['serve', '--no-worker'], { DATA_DIR: tempDir() });
    const port = Number(new URL(server.baseUrl).port);
    const idle: Socket = connect(port, '127.0.0.1');
    idle.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    await once(idle, 'data');
    const started = Date.now();
    const closed = once(idle, 'close');
    assert.equal(await server.stop('SIGTERM'), 0);
    await closed;
    assert.ok(Date.now() - started < 5_000, 'not the 72 s keep-alive time-out');
  });

  it('stops within SHUTDOWN_TIMEOUT while an upload trickles in, and says so with exit code 1', async () => {
    const server = await startTourops(['serve', '--no-worker'], {
      DATA_DIR: tempDir(),
      SHUTDOWN_TIMEOUT: '2s',
    });
    const port = Number(new URL(server.baseUrl).port);
    const upload = connect(port, '127.0.0.1');
    upload.on('error', () => undefined);
    upload.write(
      'POST /api/v1/clients HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"a":"',
    );
    const trickle = setInterval(() => upload.write('x'), 100);
    try {
      await sleep(300);
      const started = Date.now();
      const code = await server.stop('SIGTERM');
      const elapsed = Date.now() - started;
      assert.equal(code, 1);
      assert.ok(elapsed >= 1_500 && elapsed < 4_000, `exited ${elapsed} ms after the signal`);
    } finally {
      clearInterval(trickle);
      upload.destroy();
    }
  });

  it('stops with the npm start process: kill -TERM of npm reaches the server and frees the port', async () => {
    const port = await freePort();
    const npm = spawn('npm', ['start'], {
      cwd: ROOT,
      env: { ...process.env, PORT: String(port), DATA_DIR: tempDir(), LOG_LEVEL: 'warn' },
      stdio: 'ignore',
    });
    try {
      let up = false;
      for (let i = 0; i < 120 && !up; i++) {
        await sleep(250);
        up = await fetch(`http://127.0.0.1:${port}/healthz`).then(
          (r) => r.ok,
          () => false,
        );
      }
      assert.ok(up, 'npm start serves');
      npm.kill('SIGTERM');
      let free = false;
      for (let i = 0; i < 40 && !free; i++) {
        await sleep(250);
        free = await fetch(`http://127.0.0.1:${port}/healthz`).then(
          () => false,
          () => true,
        );
      }
      assert.ok(free, 'the server stopped and freed the port');
    } finally {
      npm.kill('SIGKILL');
      spawnSync('pkill', ['-KILL', '-f', `PORT=${port}`]);
    }
  });
});

/** `tourops serve` that must fail at start: its exit code, its output, how long it took. */
function failingServe(env: Record<string, string>, wrap: string[] = []) {
  const started = Date.now();
  const command = [...wrap, process.execPath, BIN, 'serve', '--no-worker'];
  const result = spawnSync(command[0], command.slice(1), {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', ...env },
    encoding: 'utf8',
    timeout: 20_000,
  });
  return {
    code: result.status,
    output: `${result.stdout}${result.stderr}`.trim(),
    ms: Date.now() - started,
  };
}

describe('start-up errors name the variable, in one line', () => {
  it('PORT already in use', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const { port } = blocker.address() as { port: number };
    try {
      const result = failingServe({ DATA_DIR: tempDir(), PORT: String(port) });
      assert.equal(result.code, 1, result.output);
      assert.equal(result.output, `tourops: PORT: 127.0.0.1:${port} is already in use`);
    } finally {
      blocker.close();
    }
  });

  it('DATA_DIR that is a file, or not writable (/proc)', () => {
    const file = join(tempDir(), 'a-file');
    writeFileSync(file, 'x');
    for (const dataDir of [file, '/proc/self', '/proc/tourops']) {
      const result = failingServe({ DATA_DIR: dataDir });
      assert.equal(result.code, 1, result.output);
      assert.match(
        result.output,
        /^tourops: DATA_DIR: "[^"]+" is not a writable directory \(\w+\)$/,
      );
      assert.ok(result.ms < 10_000);
    }
  });

  it('HOST that is not an address of this machine, or does not resolve (checked before migrating)', () => {
    // Binding to a documentation address fails locally; nothing is sent.
    const unbound = failingServe({ DATA_DIR: tempDir(), HOST: '192.0.2.1', PORT: '0' });
    assert.equal(unbound.code, 1, unbound.output);
    assert.equal(unbound.output, 'tourops: HOST: 192.0.2.1 is not an address of this machine');
    // In a network namespace of its own with only loopback, so no query leaves the machine.
    const dataDir = tempDir();
    const unresolved = failingServe({ DATA_DIR: dataDir, HOST: 'no-such-host.invalid' }, [
      'unshare',
      '-n',
    ]);
    assert.equal(unresolved.code, 1, unresolved.output);
    assert.match(
      unresolved.output,
      /^tourops: HOST: "no-such-host\.invalid" does not resolve \(\w+\)$/,
    );
    assert.deepEqual(readdirSync(dataDir), [], 'nothing was migrated');
  });

  it('creates DATA_DIR, the database and its WAL and SHM private, whatever the umask', async () => {
    const dataDir = join(tempDir(), 'nested', 'data');
    const child = spawn(
      'sh',
      ['-c', `umask 022; exec "${process.execPath}" "${BIN}" serve --no-worker`],
      {
        cwd: ROOT,
        env: {
          PATH: process.env.PATH ?? '',
          LOG_LEVEL: 'warn',
          DATA_DIR: dataDir,
          PORT: String(await freePort()),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const service: Pick<ChildService, 'stop'> = {
      stop: async () => {
        child.kill('SIGTERM');
        const [code] = await once(child, 'close');
        return code;
      },
    };
    try {
      const names = ['tourops.sqlite', 'tourops.sqlite-wal', 'tourops.sqlite-shm', 'secret.key'];
      // The key is written after the migrations, so the WAL appears first.
      for (let i = 0; i < 80 && !names.every((name) => existsSync(join(dataDir, name))); i++)
        await sleep(250);
      const mode = (path: string) => statSync(path).mode & 0o777;
      assert.equal(mode(dataDir), 0o700);
      assert.equal(mode(join(dataDir, '..')), 0o700);
      for (const name of names) {
        assert.equal(mode(join(dataDir, name)), 0o600, name);
      }
    } finally {
      await service.stop();
    }
  });
});
