import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { freePort } from '../bench/processes.ts';
import { reaped } from './helpers/children.ts';
import { TIMER_SLACK_MS } from './helpers/clock.ts';
import { BIN, type ChildService, ROOT, startTourops } from './helpers/processes.ts';
import { until } from './helpers/until.ts';

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
    // Every client served a few times before the signal.
    await until(() => (clients.every((c) => c.result().answered > 5) ? true : undefined));
    const exit = server.stop('SIGTERM');
    await Promise.all(clients.map((client) => client.closed));
    const code = await exit;
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
    // At once: no drain without SHUTDOWN_DRAIN (the stop's own record says which it did).
    assert.doesNotMatch(server.output(), /draining/);
  });

  it('drains for SHUTDOWN_DRAIN: /readyz 503 at once, new connections still served, then exits 0', async () => {
    const drainMs = 1_500;
    // At info the server logs each request and each step of its stop: the record checked below.
    const server = await startTourops(['serve', '--no-worker'], {
      DATA_DIR: tempDir(),
      SHUTDOWN_DRAIN: `${drainMs}ms`,
      LOG_LEVEL: 'info',
    });
    const port = Number(new URL(server.baseUrl).port);
    // Each probe on a connection of its own, as a balancer's health check and new clients come.
    type Answer = { path: string; status: number; body: string; close: boolean };
    type Refusal = { path: string; refused: string; at: number };
    const probe = (path: string) =>
      new Promise<Answer | Refusal>((resolve) => {
        const request = httpGet({ port, host: '127.0.0.1', path, agent: false }, (response) => {
          let body = '';
          response.setEncoding('utf8').on('data', (chunk) => {
            body += chunk;
          });
          response.on('end', () =>
            resolve({
              path,
              status: response.statusCode ?? 0,
              body,
              close: response.headers.connection === 'close',
            }),
          );
        });
        request.on('error', (error: NodeJS.ErrnoException) =>
          resolve({ path, refused: error.code ?? 'error', at: Date.now() }),
        );
      });
    const ready = await probe('/readyz');
    assert.ok('status' in ready && ready.status === 200, JSON.stringify(ready));
    const exit = server.stop('SIGTERM');
    const answers: Array<Answer | Refusal> = [];
    let exited = false;
    void exit.then(() => {
      exited = true;
    });
    while (!exited) answers.push(await probe(answers.length % 2 === 0 ? '/readyz' : '/healthz'));
    assert.equal(await exit, 0);

    // The server's own record, in the order it happened.
    const record = server.logRecords<{
      msg: string;
      time: number;
      url?: string;
      statusCode?: number;
    }>();
    const drainAt = record.findIndex((line) => line.msg === 'draining: not ready, still serving');
    const stopAt = record.findIndex((line) => line.msg === 'shutting down');
    assert.ok(drainAt > 0 && stopAt > drainAt, 'the drain, then the stop, logged');
    // Both lines carry the wall clock; the drain's timer counts from the loop's cached clock.
    assert.ok(
      record[stopAt].time - record[drainAt].time >= drainMs - TIMER_SLACK_MS,
      `the drain lasted ${record[stopAt].time - record[drainAt].time} ms`,
    );
    const probes = (from: number, to: number) =>
      record
        .slice(from, to)
        .filter((line) => line.msg === 'request' && /^\/(readyz|healthz)$/.test(line.url ?? ''));
    // Ready up to the signal; from the moment it is handled, /readyz 503 and /healthz still 200.
    for (const line of probes(0, drainAt)) assert.equal(line.statusCode, 200, JSON.stringify(line));
    const during = probes(drainAt, stopAt);
    for (const line of during) {
      assert.equal(line.statusCode, line.url === '/readyz' ? 503 : 200, JSON.stringify(line));
    }
    assert.ok(
      during.some((line) => line.url === '/readyz') &&
        during.some((line) => line.url === '/healthz'),
      `both probes served during the drain: ${JSON.stringify(during)}`,
    );
    // What the clients saw: every answer after the first 503 is the drain's, with
    // Connection: close; a connection is refused only once the drain is over, and then for good.
    const firstDraining = answers.findIndex(
      (a) => 'status' in a && a.status === 503 && JSON.parse(a.body).status === 'draining',
    );
    assert.ok(firstDraining >= 0, 'readiness was withdrawn');
    for (const answer of answers.slice(firstDraining)) {
      if (!('status' in answer)) continue;
      assert.equal(answer.status, answer.path === '/readyz' ? 503 : 200, JSON.stringify(answer));
      if (answer.status === 503) assert.deepEqual(JSON.parse(answer.body), { status: 'draining' });
      assert.ok(answer.close, 'answers during the drain say Connection: close');
    }
    const refusedAt = answers.findIndex((a) => 'refused' in a);
    if (refusedAt >= 0) {
      assert.ok(
        answers.slice(refusedAt).every((a) => 'refused' in a),
        'once refused, never served again',
      );
      const refused = answers[refusedAt] as Refusal;
      assert.ok(refused.at >= record[stopAt].time, 'refused only after the drain ended');
    }
  });

  it('closes idle keep-alive connections after a grace instead of waiting for their time-out', async () => {
    const server = await startTourops(['serve', '--no-worker'], { DATA_DIR: tempDir() });
    const port = Number(new URL(server.baseUrl).port);
    const idle: Socket = connect(port, '127.0.0.1');
    idle.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    await once(idle, 'data');
    const closed = once(idle, 'close');
    // Not the 72 s keep-alive time-out: the connection closes before the server has exited.
    let exited = false;
    const stopped = server.stop('SIGTERM').then((code) => {
      exited = true;
      return code;
    });
    await closed;
    assert.equal(exited, false, 'the idle connection was closed by the server, before its exit');
    assert.equal(await stopped, 0);
  });

  it('stops within SHUTDOWN_TIMEOUT while an upload trickles in, and says so with exit code 1', async () => {
    const server = await startTourops(['serve', '--no-worker'], {
      DATA_DIR: tempDir(),
      SHUTDOWN_TIMEOUT: '2s',
    });
    const port = Number(new URL(server.baseUrl).port);
    const upload = connect(port, '127.0.0.1');
    upload.on('error', () => undefined);
    let trickle: NodeJS.Timeout | undefined;
    try {
      upload.write(
        'POST /api/v1/clients HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"a":"',
      );
      // The server answers once it has read the headers (401: no token) while the body trickles
      // in: its answer, buffered in this socket and never read (so the server's goodbye is never
      // taken up either), says the upload has begun before the signal.
      await until(() => (upload.readableLength > 0 ? true : undefined), 'an answer');
      trickle = setInterval(() => upload.write('x'), 100);
      const started = Date.now();
      const code = await server.stop('SIGTERM');
      const elapsed = Date.now() - started;
      assert.equal(code, 1);
      // Exit code 1 is its record of giving up on the connection; the connections' share of
      // SHUTDOWN_TIMEOUT (all of it but 500 ms for the rest) is a floor the load cannot lower.
      assert.ok(elapsed >= 1_500, `exited ${elapsed} ms after the signal`);
    } finally {
      clearInterval(trickle);
      upload.destroy();
      // Stopped already, unless the test failed before: never left running.
      await server.stop('SIGKILL');
    }
  });

  it('stops with the npm start process: kill -TERM of npm reaches the server and frees the port', async () => {
    const port = await freePort();
    const npm = reaped(
      spawn('npm', ['start'], {
        cwd: ROOT,
        env: { ...process.env, PORT: String(port), DATA_DIR: tempDir(), LOG_LEVEL: 'warn' },
        stdio: 'ignore',
      }),
    );
    try {
      const serves = () =>
        fetch(`http://127.0.0.1:${port}/healthz`).then(
          (r) => r.ok,
          () => false,
        );
      await until(async () => ((await serves()) ? true : undefined), 'npm start serves');
      npm.kill('SIGTERM');
      await until(
        async () => ((await serves()) ? undefined : true),
        'the server stopped and freed the port',
      );
    } finally {
      npm.kill('SIGKILL');
      spawnSync('pkill', ['-KILL', '-f', `PORT=${port}`]);
    }
  });
});

/** `tourops serve` that must fail at start (not hang: spawnSync's time-out): code and output. */
function failingServe(env: Record<string, string>, wrap: string[] = []) {
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
    const child = reaped(
      spawn('sh', ['-c', `umask 022; exec "${process.execPath}" "${BIN}" serve --no-worker`], {
        cwd: ROOT,
        env: {
          PATH: process.env.PATH ?? '',
          LOG_LEVEL: 'warn',
          DATA_DIR: dataDir,
          PORT: String(await freePort()),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
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
      await until(
        () => (names.every((name) => existsSync(join(dataDir, name))) ? true : undefined),
        'the data files',
      );
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
