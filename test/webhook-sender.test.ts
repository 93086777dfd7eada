import assert from 'node:assert/strict';
import { createServer as createTlsServer } from 'node:https';
import { type AddressInfo, createServer } from 'node:net';
import { after, before, beforeEach, describe, it } from 'node:test';
import { type SenderOptions, type SendResult, WebhookSender } from '../src/delivery/http-sender.ts';
import { AddressGuard, type Resolver } from '../src/domain/address-guard.ts';
import { HttpsReceiver, testCa, testClientPki } from './helpers/https-receiver.ts';

/** Only loopback answers: nothing in this file may reach another address. */
const loopbackResolver: Resolver = async (hostname) => {
  if (hostname === 'localhost') return ['127.0.0.1'];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
};

/** The status and the reason, which most cases are about (errorClass and body have their own). */
const pick = (result: SendResult) => ({ status: result.status, error: result.error });

describe('WebhookSender', () => {
  let receiver: HttpsReceiver;
  let caFile: string;
  const senders: WebhookSender[] = [];

  function sender(options: Partial<SenderOptions> = {}): WebhookSender {
    const created = new WebhookSender({
      guard: new AddressGuard({ allowPrivate: true, resolver: loopbackResolver }),
      timeoutMs: 5000,
      caFile,
      ...options,
    });
    senders.push(created);
    return created;
  }

  before(async () => {
    caFile = (await testCa()).caFile;
    receiver = await HttpsReceiver.start();
  });

  beforeEach(() => {
    receiver.requests.length = 0;
    receiver.respond(() => ({ status: 200 }));
  });

  after(async () => {
    await Promise.all(senders.map((created) => created.close()));
    await receiver.close();
  });

  it('POSTs the exact body and headers', async () => {
    const body = JSON.stringify({ type: 'booking.created', data: { guest: 'Zoë Ørsted ✈' } });
    const headers = {
      'content-type': 'application/json',
      'webhook-id': 'msg_01J0000000000000000000000',
      'webhook-timestamp': '1718000000',
      'webhook-signature': 'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=',
    };
    const result = await sender().send(receiver.url('/hooks/tourops?tenant=t1'), headers, body);
    assert.deepEqual(pick(result), { status: 200, error: null });
    assert.equal(receiver.requests.length, 1);
    const [received] = receiver.requests;
    assert.equal(received.method, 'POST');
    assert.equal(received.path, '/hooks/tourops?tenant=t1');
    assert.equal(received.body, body);
    for (const [name, value] of Object.entries(headers)) {
      assert.equal(received.headers[name], value, name);
    }
    assert.equal(received.headers['content-length'], String(Buffer.byteLength(body)));
    assert.equal(received.headers.host, `127.0.0.1:${receiver.port}`);
  });

  it('reaches a name through the lookup when private targets are allowed', async () => {
    const result = await sender().send(`https://localhost:${receiver.port}/hook`, {}, 'x');
    assert.deepEqual(pick(result), { status: 200, error: null });
    assert.equal(receiver.requests.length, 1);
  });

  it('keeps the first KiB of an answer as text, whatever its status', async () => {
    receiver.respond(() => ({ status: 422, body: `{"error":"bad field"}${'é'.repeat(2000)}` }));
    const result = await sender().send(receiver.url(), {}, '{}');
    assert.equal(result.status, 422);
    assert.equal(result.errorClass, null);
    assert.ok(result.body.startsWith('{"error":"bad field"}'));
    assert.ok(Buffer.byteLength(result.body) <= 1026, 'about a KiB (a cut character is U+FFFD)');
  });

  it('reports the status of every answer', async () => {
    receiver.respond((request) => ({ status: Number(request.path.slice('/status/'.length)) }));
    const sending = sender();
    for (const status of [200, 204, 500, 404, 410, 429]) {
      const result = await sending.send(receiver.url(`/status/${status}`), {}, '{}');
      assert.deepEqual(pick(result), { status, error: null });
    }
  });

  it('does not follow a redirect: the 3xx is the result', async () => {
    for (const status of [301, 302, 307, 308]) {
      receiver.requests.length = 0;
      receiver.respond((request) =>
        request.path === '/hook'
          ? { status, headers: { location: receiver.url('/elsewhere') } }
          : { status: 200 },
      );
      const result = await sender().send(receiver.url(), {}, '{}');
      assert.deepEqual(pick(result), { status, error: null });
      assert.equal(result.errorClass, 'redirect');
      assert.deepEqual(
        receiver.requests.map((request) => request.path),
        ['/hook'],
      );
    }
  });

  it('counts a 2xx with a huge body by its status, reading at most 64 KiB of it', async () => {
    // 32 MB, each 64 KiB written only once the last has left for the network: what the receiver
    // got to write shows what the sender read, give or take the sockets' buffers.
    const ca = await testCa();
    const chunk = Buffer.alloc(64 * 1024, 'x');
    const CHUNKS = 512;
    let closed: (written: number) => void = () => undefined;
    const written = new Promise<number>((resolve) => {
      closed = resolve;
    });
    const server = createTlsServer({ key: ca.key, cert: ca.cert }, (_request, response) => {
      let sent = 0;
      response.once('close', () => closed(sent));
      response.writeHead(200, { 'content-length': String(CHUNKS * chunk.length) });
      const pump = () => {
        while (sent < CHUNKS) {
          sent += 1;
          if (!response.write(chunk)) {
            response.once('drain', pump);
            return;
          }
        }
        response.end();
      };
      pump();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
      const result = await sender({ timeoutMs: 5_000 }).send(url, {}, '{}');
      assert.deepEqual(pick(result), { status: 200, error: null });
      assert.equal(result.errorClass, 'body_too_large');
      assert.equal(result.body, 'x'.repeat(1024), 'the first KiB is kept');
      // Not read to the end: the connection closed with most of the answer never written.
      const chunks = await written;
      assert.ok(chunks < CHUNKS / 2, `${chunks} of ${CHUNKS} chunks written`);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('gives up on a receiver that never answers after about timeoutMs', async () => {
    receiver.respond(() => 'hang');
    const started = performance.now();
    const result = await sender({ timeoutMs: 300 }).send(receiver.url(), {}, '{}');
    const elapsed = performance.now() - started;
    assert.deepEqual(pick(result), { status: null, error: 'timeout' });
    assert.equal(result.errorClass, 'timeout');
    assert.equal((await receiver.waitFor(1)).length, 1, 'the request did arrive');
    assert.ok(elapsed >= 280, `took ${elapsed} ms`);
  });

  it('gives up before an answer that comes five times its time-out late', async () => {
    // Both timers run in this process, in the order they are due: the answer, due 1.5 s after
    // the request arrived, cannot come first unless the time-out is far past 300 ms.
    receiver.respond(() => ({ status: 200, delayMs: 1_500 }));
    const result = await sender({ timeoutMs: 300 }).send(receiver.url(), {}, '{}');
    assert.deepEqual(pick(result), { status: null, error: 'timeout' });
  });

  it('is timed out by its own timer, not by the pool backing it up a second later', async () => {
    // The answer is due twice the time-out after the request arrived, before undici's backstop
    // (time-out + 1 s): only the attempt's own timer, due first, makes this a time-out.
    receiver.respond(() => ({ status: 200, delayMs: 600 }));
    const result = await sender({ timeoutMs: 300 }).send(receiver.url(), {}, '{}');
    assert.deepEqual(pick(result), { status: null, error: 'timeout' });
  });

  it('waits for a slow answer inside the time-out', async () => {
    receiver.respond(() => ({ status: 202, delayMs: 100 }));
    const result = await sender({ timeoutMs: 2000 }).send(receiver.url(), {}, '{}');
    assert.deepEqual(pick(result), { status: 202, error: null });
  });

  it('discards a 1 MB response body and keeps working', async () => {
    const big = 'x'.repeat(1024 * 1024);
    receiver.respond(() => ({ status: 200, body: big }));
    const sending = sender();
    assert.deepEqual(pick(await sending.send(receiver.url(), {}, '{}')), {
      status: 200,
      error: null,
    });
    receiver.respond(() => ({ status: 201, body: 'small' }));
    assert.deepEqual(pick(await sending.send(receiver.url(), {}, '{}')), {
      status: 201,
      error: null,
    });
    assert.equal(receiver.requests.length, 2);
  });

  it('reports a refused connection', async () => {
    // A port that was just free on 127.0.0.1 and has nothing listening now.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const address = probe.address();
    assert.ok(address !== null && typeof address === 'object');
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const result = await sender().send(`https://127.0.0.1:${address.port}/hook`, {}, '{}');
    assert.deepEqual(pick(result), { status: null, error: 'connection refused' });
    assert.equal(result.errorClass, 'connection_refused');
  });

  it('reports a tls error for a certificate it does not trust', async () => {
    const connectionsBefore = receiver.connectionCount;
    const result = await sender({ caFile: null }).send(receiver.url(), {}, '{}');
    assert.deepEqual(pick(result), { status: null, error: 'tls error' });
    assert.equal(result.errorClass, 'tls');
    assert.equal(receiver.requests.length, 0);
    assert.equal(receiver.connectionCount, connectionsBefore + 1, 'it did try to connect');
    // The attempt log says which side refused, and why.
    assert.match(
      result.body,
      /^TLS: the receiver's certificate was refused here: unable to verify the first certificate \(UNABLE_TO_VERIFY_LEAF_SIGNATURE\)$/,
    );
  });

  it('says when the receiver refuses the handshake, and when a client certificate cannot be presented', async () => {
    const pki = await testClientPki();
    const ca = await testCa();
    /** A receiver demanding a certificate of the client CA: the handshake fails without one. */
    const strictReceiver = async (maxVersion: 'TLSv1.2' | 'TLSv1.3') => {
      const server = createTlsServer(
        {
          key: ca.key,
          cert: ca.cert,
          ca: pki.ca,
          requestCert: true,
          rejectUnauthorized: true,
          maxVersion,
        },
        (_request, response) => response.end(),
      );
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      servers.push(server);
      return `https://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    };
    const servers: Array<ReturnType<typeof createTlsServer>> = [];
    try {
      const tls12 = await strictReceiver('TLSv1.2');
      const refused = await sender().send(tls12, {}, '{}');
      assert.equal(refused.errorClass, 'tls', JSON.stringify(refused));
      assert.equal(
        refused.body,
        'TLS: the receiver refused the handshake (sslv3 alert handshake failure, SSL alert number 40)',
      );
      // Under TLS 1.3 the refusal is a closed connection: the words say what that may mean.
      const tls13 = await strictReceiver('TLSv1.3');
      const closed = await sender().send(tls13, {}, '{}', undefined, {
        id: 'stranger',
        ...(await testClientPki()).client,
      });
      assert.equal(closed.errorClass, 'connection_reset', JSON.stringify(closed));
      assert.match(
        closed.body,
        /^The receiver closed the connection without answering; under TLS 1\.3/,
      );
      const weak = await sender().send(tls12, {}, '{}', undefined, { id: 'weak', ...pki.weak });
      assert.equal(weak.errorClass, 'tls', JSON.stringify(weak));
      assert.equal(
        weak.body,
        "TLS: the subscription's client certificate cannot be presented: ee key too small",
      );
    } finally {
      for (const server of servers) {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
    }
  });

  it('refuses a name that rebinds to loopback between check and connect (DNS rebinding)', async () => {
    const asked: string[] = [];
    let checking = false;
    const resolver: Resolver = async (hostname) => {
      asked.push(hostname);
      // The public answer goes to checkUrl only (it never connects), and only once.
      const answer = checking ? ['93.184.215.14'] : ['127.0.0.1'];
      checking = false;
      return answer;
    };
    const guard = new AddressGuard({ allowPrivate: false, resolver });
    const url = `https://rebind.test:${receiver.port}/hook`;

    checking = true;
    assert.equal((await guard.checkUrl(url)).ok, true, 'registration saw a public address');
    assert.equal(checking, false);

    const connectionsBefore = receiver.connectionCount;
    const result = await sender({ guard }).send(url, {}, '{}');
    assert.deepEqual(pick(result), { status: null, error: 'blocked address' });
    assert.equal(result.errorClass, 'address_blocked');
    assert.deepEqual(
      asked,
      ['rebind.test', 'rebind.test'],
      'the address was checked at connect time',
    );
    assert.equal(receiver.connectionCount, connectionsBefore);
    assert.equal(receiver.requests.length, 0);
  });

  it('refuses literal private hosts before connecting', async () => {
    const guard = new AddressGuard({ allowPrivate: false, resolver: loopbackResolver });
    const sending = sender({ guard });
    const connectionsBefore = receiver.connectionCount;
    for (const url of [
      receiver.url(),
      `https://[::ffff:127.0.0.1]:${receiver.port}/hook`,
      `https://[::1]:${receiver.port}/hook`,
      `https://2130706433:${receiver.port}/hook`,
    ]) {
      assert.deepEqual(pick(await sending.send(url, {}, '{}')), {
        status: null,
        error: 'blocked address',
      });
    }
    assert.deepEqual(pick(await sending.send(`https://localhost:${receiver.port}/`, {}, '{}')), {
      status: null,
      error: 'blocked address',
    });
    assert.equal(receiver.connectionCount, connectionsBefore);
    assert.equal(receiver.requests.length, 0);
  });

  it('refuses anything but https without connecting', async () => {
    const connectionsBefore = receiver.connectionCount;
    const sending = sender();
    for (const url of [
      receiver.url().replace('https:', 'http:'),
      `https://user:pass@127.0.0.1:${receiver.port}/hook`,
      'not a url',
    ]) {
      assert.deepEqual(
        pick(await sending.send(url, {}, '{}')),
        { status: null, error: 'invalid url' },
        url,
      );
    }
    assert.equal(receiver.connectionCount, connectionsBefore);
  });

  it('keeps connections alive: 50 sequential sends use at most 2', async () => {
    const sending = sender();
    const connectionsBefore = receiver.connectionCount;
    for (let i = 0; i < 50; i++) {
      assert.deepEqual(pick(await sending.send(receiver.url(), {}, `{"n":${i}}`)), {
        status: 200,
        error: null,
      });
    }
    assert.equal(receiver.requests.length, 50);
    const opened = receiver.connectionCount - connectionsBefore;
    assert.ok(opened >= 1 && opened <= 2, `opened ${opened} connections`);
  });

  it('bounds connections per origin', async () => {
    receiver.respond(() => ({ status: 200, delayMs: 50 }));
    const sending = sender({ connectionsPerOrigin: 3 });
    const connectionsBefore = receiver.connectionCount;
    const results = await Promise.all(
      Array.from({ length: 12 }, () => sending.send(receiver.url(), {}, '{}')),
    );
    assert.ok(results.every((result) => result.status === 200 && result.error === null));
    assert.equal(receiver.connectionCount - connectionsBefore, 3);
  });
});
