import type { JetStreamClient, NatsConnection, TlsOptions } from 'nats';
import type { NatsTarget } from '../domain/destinations.ts';
import {
  type BrokerDeps,
  type BrokerMessage,
  brokerFailure,
  connectionFailure,
} from './broker-outcomes.ts';
import { LinkPool } from './broker-pool.ts';
import type { SendResult } from './http-sender.ts';

interface NatsLink {
  /** The client library, loaded with the first link. */
  nats: typeof import('nats');
  connection: NatsConnection;
  jetstream: JetStreamClient;
}

/**
 * Publishes to NATS JetStream and waits for the stream's acknowledgement, the success. The event
 * id goes as `Nats-Msg-Id`, so a stream stores a redelivery within its duplicate window once (the
 * ack then says `duplicate`). No stream taking the subject, or a refusal by the stream, is
 * `broker_refused`; JetStream's 429 or 503 with an API error is `broker_busy`.
 */
export class NatsSender {
  private readonly pool: LinkPool<NatsLink>;

  constructor(private readonly deps: BrokerDeps) {
    this.pool = new LinkPool({
      idleMs: deps.idleMs,
      close: (link) => link.connection.close().catch(() => undefined),
      isClosed: (link) => link.connection.isClosed(),
    });
  }

  async send(
    key: string,
    target: NatsTarget,
    password: string | null,
    message: BrokerMessage,
  ): Promise<SendResult> {
    let link: NatsLink;
    try {
      link = await this.pool.live(key, () => this.open(target, password));
    } catch (error) {
      return connectionFailure(error);
    }
    const headers = link.nats.headers();
    for (const [name, value] of Object.entries(message.headers)) headers.set(name, value);
    try {
      const ack = await link.jetstream.publish(target.subject, Buffer.from(message.body), {
        msgID: message.eventId,
        headers,
        timeout: this.deps.timeoutMs,
      });
      return {
        status: null,
        acknowledged: true,
        error: null,
        errorClass: null,
        body: JSON.stringify({ stream: ack.stream, seq: ack.seq, duplicate: ack.duplicate }),
      };
    } catch (error) {
      return publishFailure(target, error, link);
    }
  }

  private async open(target: NatsTarget, password: string | null): Promise<NatsLink> {
    const address = await this.deps.guard.addressFor(target.host);
    const server = address.includes(':')
      ? `[${address}]:${target.port}`
      : `${address}:${target.port}`;
    // Loaded at the first NATS destination: most processes never have one.
    const nats = await import('nats');
    const connection = await nats.connect({
      servers: server,
      user: target.username === '' ? undefined : target.username,
      pass: password ?? undefined,
      // Passed on to tls.connect as they are (the client's own type names only a few).
      tls: target.tls ? (this.deps.tlsOptions(target.host) as TlsOptions) : undefined,
      timeout: this.deps.timeoutMs,
      name: 'tourops-webhooks',
      // The guard checked this address: never follow the server's list of others.
      reconnect: false,
      ignoreClusterUpdates: true,
    });
    const link: NatsLink = {
      nats,
      connection,
      jetstream: connection.jetstream({ timeout: this.deps.timeoutMs }),
    };
    return link;
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

/**
 * A publish JetStream refused, or one its connection failed (the next attempt reconnects). The
 * client's errors are told apart with the library `link` loaded.
 */
function publishFailure(target: NatsTarget, error: unknown, link: NatsLink): SendResult {
  if (error instanceof link.nats.NatsError) {
    const api = error.jsError();
    if (api !== null) {
      const words = `${api.code} ${api.description}`;
      return brokerFailure(
        api.code === 429 || api.code === 503 ? 'broker_busy' : 'broker_refused',
        words,
      );
    }
    if (error.code === '503') {
      return brokerFailure(
        'broker_refused',
        `no JetStream stream takes the subject ${target.subject} (503 no responders)`,
      );
    }
  }
  return connectionFailure(error);
}
