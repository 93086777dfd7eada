import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createTlsServer } from 'node:tls';
import { promisify } from 'node:util';
import { connect as amqpConnect, type ChannelModel } from 'amqplib';
import {
  type JetStreamManager,
  type NatsConnection,
  connect as natsConnect,
  type StreamConfig,
} from 'nats';
import { freePort } from '../../bench/processes.ts';
import { reaped } from './children.ts';

// The machine's brokers (RabbitMQ on 5672, NATS with JetStream on 4222): the broker suites talk
// to the real thing. A broker that is down fails the suite with the command that starts it, so a
// missing broker is never a silent skip.

export const RABBIT_PORT = 5672;
export const NATS_PORT = 4222;

const run = promisify(execFile);

const START = {
  rabbit: 'rabbitmq-server -detached',
  nats: 'start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log',
};

function missing(name: string, port: number, start: string, error: unknown): Error {
  const cause = error instanceof Error ? error.message : String(error);
  return new Error(
    `${name} is not reachable on 127.0.0.1:${port} (${cause}); these tests need it running: ${start} (.ci/run starts it)`,
  );
}

export interface Message {
  body: string;
  headers: Record<string, string>;
  messageId?: string;
}

/**
 * A RabbitMQ topic exchange of its own with one queue bound to `events.#`, and what reached it;
 * `routingKey` is one that binding takes.
 */
export class RabbitQueue {
  readonly messages: Message[] = [];

  private constructor(
    private readonly model: ChannelModel,
    readonly exchange: string,
    readonly routingKey: string,
  ) {}

  static async open(): Promise<RabbitQueue> {
    let model: ChannelModel;
    try {
      model = await amqpConnect(`amqp://guest:guest@127.0.0.1:${RABBIT_PORT}`);
    } catch (error) {
      throw missing('RabbitMQ', RABBIT_PORT, START.rabbit, error);
    }
    const name = `tourops-test-${randomBytes(4).toString('hex')}`;
    const channel = await model.createChannel();
    await channel.assertExchange(name, 'topic', { autoDelete: true });
    const queue = await channel.assertQueue('', { exclusive: true });
    await channel.bindQueue(queue.queue, name, 'events.#');
    const rabbit = new RabbitQueue(model, name, 'events.clients');
    await channel.consume(
      queue.queue,
      (message) => {
        if (message === null) return;
        const headers: Record<string, string> = {};
        for (const [key, value] of Object.entries(message.properties.headers ?? {})) {
          headers[key] = String(value);
        }
        rabbit.messages.push({
          body: message.content.toString('utf8'),
          headers,
          messageId: message.properties.messageId,
        });
      },
      { noAck: true },
    );
    return rabbit;
  }

  /** Removes what a snippet declared (durable, so it would outlive the test). */
  async deleteExchange(exchange: string, queue: string): Promise<void> {
    const channel = await this.model.createChannel();
    await channel.deleteQueue(queue);
    await channel.deleteExchange(exchange);
    await channel.close();
  }

  async close(): Promise<void> {
    await this.model.close();
  }
}

/** A JetStream stream of its own on one subject. */
export class NatsStream {
  private constructor(
    private readonly connection: NatsConnection,
    private readonly manager: JetStreamManager,
    readonly name: string,
    readonly subject: string,
  ) {}

  /** `limits`: the stream's own, e.g. `{ max_msgs: 1, discard: DiscardPolicy.New }`. */
  static async open(limits: Partial<StreamConfig> = {}): Promise<NatsStream> {
    let connection: NatsConnection;
    try {
      connection = await natsConnect({ servers: `127.0.0.1:${NATS_PORT}` });
    } catch (error) {
      throw missing('NATS', NATS_PORT, START.nats, error);
    }
    const manager = await connection.jetstreamManager();
    const id = randomBytes(4).toString('hex');
    const name = `TOUROPS_TEST_${id}`;
    const subject = `tourops.test.${id}`;
    await manager.streams.add({
      name,
      subjects: [subject],
      duplicate_window: 120_000_000_000,
      ...limits,
    });
    return new NatsStream(connection, manager, name, subject);
  }

  /** Deletes a stream a snippet declared. */
  static async remove(name: string): Promise<void> {
    const connection = await natsConnect({ servers: `127.0.0.1:${NATS_PORT}` });
    const manager = await connection.jetstreamManager();
    await manager.streams.delete(name).catch(() => undefined);
    await connection.close();
  }

  async purge(): Promise<void> {
    await this.manager.streams.purge(this.name);
  }

  async count(): Promise<number> {
    return (await this.manager.streams.info(this.name)).state.messages;
  }

  /** Every message stored, in stream order. */
  async messages(): Promise<Message[]> {
    const { messages: count, first_seq: first } = (await this.manager.streams.info(this.name))
      .state;
    const stored: Message[] = [];
    for (let seq = first; stored.length < count; seq++) {
      const message = await this.manager.streams.getMessage(this.name, { seq });
      const headers: Record<string, string> = {};
      for (const [key, values] of message.header ?? []) headers[key] = values.join(',');
      stored.push({ body: new TextDecoder().decode(message.data), headers });
    }
    return stored;
  }

  async close(): Promise<void> {
    await this.manager.streams.delete(this.name).catch(() => undefined);
    await this.connection.close();
  }
}

/**
 * A RabbitMQ user of the test's own with a fresh password, allowed everything on `/`: so that a
 * password in a subscription's URL is one a leak could be searched for.
 */
export async function rabbitUser(): Promise<{
  username: string;
  password: string;
  remove: () => Promise<void>;
}> {
  // A name of this run's own: another run on the machine may hold (and remove) another.
  const username = `tourops-test-${randomBytes(4).toString('hex')}`;
  const password = `pw-${randomBytes(12).toString('hex')}`;
  await run('rabbitmqctl', ['add_user', username, password]);
  await run('rabbitmqctl', ['set_permissions', '-p', '/', username, '.*', '.*', '.*']);
  const remove = async () => {
    await run('rabbitmqctl', ['delete_user', username]).catch(() => undefined);
  };
  return { username, password, remove };
}

/**
 * A NATS server of the test's own with JetStream, serving TLS only with testCa()'s certificate
 * for 127.0.0.1, on a free port and a temporary store; stopped by its pid.
 */
export async function startTlsNats(tls: { key: string; cert: string; caFile: string }) {
  const dir = mkdtempSync(join(tmpdir(), 'tourops-nats-'));
  writeFileSync(join(dir, 'server.key'), tls.key);
  writeFileSync(join(dir, 'server.pem'), tls.cert);
  const port = await freePort();
  const child = reaped(
    spawn(
      '/usr/sbin/nats-server',
      [
        '-a',
        '127.0.0.1',
        '-p',
        String(port),
        '-js',
        '-sd',
        join(dir, 'store'),
        '--tls',
        '--tlscert',
        join(dir, 'server.pem'),
        '--tlskey',
        join(dir, 'server.key'),
      ],
      { stdio: 'ignore' },
    ),
  );
  const connectTls = () =>
    natsConnect({ servers: `127.0.0.1:${port}`, tls: { caFile: tls.caFile } });
  let connection: NatsConnection | null = null;
  for (let tries = 0; connection === null; tries++) {
    try {
      connection = await connectTls();
    } catch (error) {
      if (tries > 50) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  const manager = await connection.jetstreamManager();
  return {
    port,
    manager,
    stop: async () => {
      await connection?.close();
      child.kill('SIGTERM');
      if (child.exitCode === null && child.signalCode === null) await once(child, 'exit');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A relay in front of one of the machine's brokers, as a load balancer would stand: on a free port,
 * each connection piped to `upstreamPort`; with `tls`, it terminates TLS with that certificate
 * (testCa()'s, for 127.0.0.1). `freeze` makes it a broker that falls silent (connections stay open,
 * nothing passes); `cut` ends every connection as a network failure would.
 */
export class BrokerProxy {
  private readonly sockets = new Set<Socket>();
  private readonly server: Server;
  private frozen = false;

  private constructor(upstreamPort: number, tls?: { key: string; cert: string }) {
    const relay = (client: Socket) => this.relay(client, upstreamPort);
    this.server = tls
      ? createTlsServer({ key: tls.key, cert: tls.cert }, relay)
      : createServer(relay);
  }

  static async start(
    upstreamPort: number,
    tls?: { key: string; cert: string },
  ): Promise<BrokerProxy> {
    const proxy = new BrokerProxy(upstreamPort, tls);
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get port(): number {
    return (this.server.address() as { port: number }).port;
  }

  freeze(): void {
    this.frozen = true;
  }

  cut(): void {
    for (const socket of this.sockets) socket.destroy();
  }

  async stop(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.cut();
    await closed;
  }

  private relay(client: Socket, upstreamPort: number): void {
    const upstream = tcpConnect(upstreamPort, '127.0.0.1');
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      this.sockets.add(from);
      from.on('error', end);
      from.on('close', () => {
        this.sockets.delete(from);
        end();
      });
      from.on('data', (chunk: Buffer) => {
        if (!this.frozen) to.write(chunk);
      });
    }
  }
}
