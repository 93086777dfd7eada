import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { eventually, HUNG_AFTER_MS } from './until.ts';

const run = promisify(execFile);

export interface TestCa {
  /** PEM file of the CA, as WebhookSender's caFile. */
  caFile: string;
  /** PEM key and certificate of the server (SANs IP:127.0.0.1, DNS:localhost, and DNS:receiver for the compose test's receiver container). */
  key: string;
  cert: string;
}

let ca: Promise<TestCa> | null = null;

/** Generated once per process with the `openssl` CLI into a temp dir, removed at exit. */
export function testCa(): Promise<TestCa> {
  ca ??= generateCa();
  return ca;
}

/** EC P-256 keys, unencrypted: what every certificate here is made with. */
const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/** A self-signed CA valid 2 days, as `ca.key` and `ca.pem` in `file`'s directory. */
async function selfSignedCa(
  file: (name: string) => string,
  subject: string,
  extra: string[] = [],
): Promise<void> {
  await run('openssl', [
    'req',
    '-x509',
    ...EC_KEY,
    '-keyout',
    file('ca.key'),
    '-out',
    file('ca.pem'),
    '-days',
    '2',
    '-subj',
    subject,
    ...extra,
  ]);
}

/** `<name>.key` and `<name>.pem`, signed by the CA beside them, valid `days`. */
async function signedPair(
  file: (name: string) => string,
  name: string,
  subject: string,
  days: string,
  extra: string[] = [],
  key: string[] = EC_KEY,
): Promise<void> {
  await run('openssl', [
    'req',
    ...key,
    '-keyout',
    file(`${name}.key`),
    '-out',
    file(`${name}.csr`),
    '-subj',
    subject,
  ]);
  await run('openssl', [
    'x509',
    '-req',
    '-in',
    file(`${name}.csr`),
    '-CA',
    file('ca.pem'),
    '-CAkey',
    file('ca.key'),
    '-CAcreateserial',
    '-out',
    file(`${name}.pem`),
    '-days',
    days,
    ...extra,
  ]);
}

async function generateCa(): Promise<TestCa> {
  const dir = mkdtempSync(join(tmpdir(), 'tourops-test-ca-'));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string) => join(dir, name);
  await selfSignedCa(file, '/CN=tourops test CA', [
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  writeFileSync(
    file('server.ext'),
    [
      'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:receiver',
      'basicConstraints=CA:FALSE',
      'keyUsage=critical,digitalSignature',
      'extendedKeyUsage=serverAuth',
    ].join('\n'),
  );
  await signedPair(file, 'server', '/CN=localhost', '2', ['-extfile', file('server.ext')]);
  return {
    caFile: file('ca.pem'),
    key: readFileSync(file('server.key'), 'utf8'),
    cert: readFileSync(file('server.pem'), 'utf8'),
  };
}

/** A TLS client certificate and its key, PEM. */
interface ClientPair {
  certificate: string;
  privateKey: string;
}

/** A client CA (for a receiver that asks for certificates) and pairs it signed. */
export interface ClientPki {
  ca: string;
  /** `CN=tourops-client, O=Tour Ops`, valid 30 days. */
  client: ClientPair;
  /** Another subject, valid 30 days: its key matches no other certificate. */
  other: ClientPair;
  /** Valid 10 days: within the 14-day warning. */
  soon: ClientPair;
  /** An RSA key of 512 bits: too weak for TLS's default security level. */
  weak: ClientPair;
}

/** A client CA and what it signs (openssl, EC P-256, like testCa), for mutual-TLS receivers. */
export async function testClientPki(): Promise<ClientPki> {
  const dir = mkdtempSync(join(tmpdir(), 'tourops-client-ca-'));
  const file = (name: string) => join(dir, name);
  try {
    await selfSignedCa(file, '/CN=client test CA');
    const issue = async (name: string, days: string, key = EC_KEY): Promise<ClientPair> => {
      await signedPair(file, name, `/CN=${name}/O=Tour Ops`, days, [], key);
      return {
        certificate: readFileSync(file(`${name}.pem`), 'utf8'),
        privateKey: readFileSync(file(`${name}.key`), 'utf8'),
      };
    };
    return {
      ca: readFileSync(file('ca.pem'), 'utf8'),
      client: await issue('tourops-client', '30'),
      other: await issue('someone-else', '30'),
      soon: await issue('expiring-soon', '10'),
      weak: await issue('weak-key', '30', ['-newkey', 'rsa:512', '-nodes']),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface ReceivedRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  /** The sender's port: which connection (and so which process) it came on. */
  remotePort: number;
  /** performance.now() when the whole body had arrived. */
  receivedAt: number;
}

/** A delivery's Standard Webhooks headers, as the `standardwebhooks` verifiers take them. */
export function standardWebhookHeaders(request: ReceivedRequest): Record<string, string> {
  return Object.fromEntries(
    ['webhook-id', 'webhook-timestamp', 'webhook-signature'].map((name) => [
      name,
      String(request.headers[name]),
    ]),
  );
}

export type Responder = (request: ReceivedRequest) =>
  | {
      status: number;
      delayMs?: number;
      /** Answer once this settles (a gate the test opens), rather than at once. */
      after?: Promise<unknown>;
      body?: string;
      headers?: Record<string, string>;
    }
  | 'hang'
  /** 200 with a content-length of 100, then one byte and nothing more. */
  | 'stall';

const ok: Responder = () => ({ status: 200 });

/** A real HTTPS endpoint on 127.0.0.1 with a certificate from testCa(). */
export class HttpsReceiver {
  readonly requests: ReceivedRequest[] = [];
  private responder: Responder;
  private readonly sockets = new Set<Socket>();
  private readonly waiters = new Set<() => void>();
  private connections = 0;
  private open = 0;
  private mostOpen = 0;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    responder: Responder,
  ) {
    this.responder = responder;
  }

  static async start(options: { responder?: Responder } = {}): Promise<HttpsReceiver> {
    const { key, cert } = await testCa();
    let receiver: HttpsReceiver | null = null;
    const server = createServer({ key, cert }, (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        if (receiver === null) return;
        const request: ReceivedRequest = {
          method: req.method ?? '',
          path: req.url ?? '',
          headers: req.headers,
          body: Buffer.concat(chunks).toString('utf8'),
          remotePort: req.socket.remotePort ?? 0,
          receivedAt: performance.now(),
        };
        const answered = receiver.opened(res);
        receiver.received(request);
        const answer = receiver.responder(request);
        if (answer === 'hang') return;
        if (answer === 'stall') {
          res.writeHead(200, { 'content-length': '100' }).write('{');
          return;
        }
        const reply = () => {
          answered();
          res.writeHead(answer.status, answer.headers).end(answer.body);
        };
        if (answer.after) void answer.after.then(reply);
        else if (answer.delayMs) setTimeout(reply, answer.delayMs);
        else reply();
      });
    });
    // Every TCP connection, TLS or not yet: close() must be able to end the hung ones too.
    server.on('connection', (socket: Socket) => {
      receiver?.accepted(socket);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    receiver = new HttpsReceiver(server, address.port, options.responder ?? ok);
    return receiver;
  }

  /** Requests received and not yet answered (or cut off). */
  get openRequests(): number {
    return this.open;
  }

  /** The most requests open at once so far: a sender's concurrency, as the receiver sees it. */
  get mostOpenRequests(): number {
    return this.mostOpen;
  }

  /** TCP connections accepted so far (a sender that keeps connections alive opens few). */
  get connectionCount(): number {
    return this.connections;
  }

  url(path = '/hook'): string {
    return `https://127.0.0.1:${this.port}${path}`;
  }

  respond(responder: Responder): void {
    this.responder = responder;
  }

  /** Resolves once `count` requests have arrived; rejects once it has hung (HUNG_AFTER_MS). */
  waitFor(count: number): Promise<ReceivedRequest[]> {
    if (this.requests.length >= count) return Promise.resolve(this.requests);
    return new Promise((resolve, reject) => {
      const check = () => {
        if (this.requests.length < count) return;
        this.waiters.delete(check);
        clearTimeout(timer);
        resolve(this.requests);
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(
          new Error(`received ${this.requests.length} of ${count} requests in ${HUNG_AFTER_MS} ms`),
        );
      }, HUNG_AFTER_MS);
      this.waiters.add(check);
    });
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  private accepted(socket: Socket): void {
    this.connections += 1;
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
  }

  /**
   * Counts a request open until it is answered: at once when its answer is written (the call
   * returned), since the sender may read that answer and send its next request before this
   * response's own 'close' comes round, or when it is cut off.
   */
  private opened(response: ServerResponse): () => void {
    this.open += 1;
    this.mostOpen = Math.max(this.mostOpen, this.open);
    let open = true;
    const answered = () => {
      if (open) this.open -= 1;
      open = false;
    };
    response.once('close', answered);
    return answered;
  }

  private received(request: ReceivedRequest): void {
    this.requests.push(request);
    for (const waiter of this.waiters) waiter();
  }
}

/**
 * The JSON bodies `receiver` got, by their `sequence`, once sequences 1…`last` have all arrived
 * (each at least once: a body sent again is the same body).
 */
export async function bodiesBySequence<T extends { sequence: number }>(
  receiver: HttpsReceiver,
  last: number,
): Promise<Map<number, T>> {
  const bodies = new Map<number, T>();
  await eventually(() => {
    for (const request of receiver.requests) {
      const body = JSON.parse(request.body) as T;
      bodies.set(body.sequence, body);
    }
    return bodies.size === last;
  }, 'every event delivered');
  return bodies;
}
