import type { ChannelModel, ConfirmChannel, Message } from 'amqplib';
import type { AmqpTarget } from '../domain/destinations.ts';
import {
  type BrokerDeps,
  type BrokerMessage,
  BrokerRefusal,
  brokerFailure,
  connectionFailure,
  DELIVERED,
} from './broker-outcomes.ts';
import { LinkPool } from './broker-pool.ts';
import type { SendResult } from './http-sender.ts';

interface ReturnFields {
  replyText?: string;
  exchange: string;
  routingKey: string;
}

/** One destination's connection and its confirm channel. */
interface AmqpLink {
  model: ChannelModel;
  channel: ConfirmChannel;
  /** Why the broker blocked publishing (a resource alarm), while it does. */
  blocked: string | null;
  /** What closed the channel or the connection, once one is closed (see closedBy). */
  closed: SendResult | null;
  /** Attempts whose message came back unroutable, by request id, with the broker's reply. */
  returned: Map<string, string>;
}

/**
 * Publishes to RabbitMQ: `mandatory`, persistent, on a confirm channel. The broker's confirm is
 * the success; a nack, a message returned as unroutable, or a channel the broker closed (an
 * unknown exchange, say) is `broker_refused`; a connection the broker blocked is `broker_busy`.
 */
export class AmqpSender {
  private readonly pool: LinkPool<AmqpLink>;

  constructor(private readonly deps: BrokerDeps) {
    this.pool = new LinkPool({
      idleMs: deps.idleMs,
      close: (link) => closeModel(link.model, deps.timeoutMs),
      isClosed: (link) => link.closed !== null,
    });
  }

  async send(
    key: string,
    target: AmqpTarget,
    password: string | null,
    message: BrokerMessage,
  ): Promise<SendResult> {
    let link: AmqpLink;
    try {
      link = await this.pool.live(key, () => this.open(target, password));
    } catch (error) {
      return connectionFailure(error);
    }
    if (link.blocked !== null) {
      return brokerFailure('broker_busy', `connection blocked: ${link.blocked}`);
    }
    const { headers } = message;
    const requestId = headers['service-request-id'];
    const sent = new Promise<SendResult>((resolve) => {
      link.channel.publish(
        target.exchange,
        target.routingKey,
        Buffer.from(message.body),
        {
          messageId: message.eventId,
          contentType: 'application/json',
          persistent: true,
          mandatory: true,
          timestamp: Math.floor(Date.now() / 1000),
          headers,
        },
        (error: unknown) => {
          const returned = link.returned.get(requestId);
          link.returned.delete(requestId);
          if (link.closed !== null) {
            this.pool.drop(key, link);
            resolve(link.closed);
          } else if (error) {
            resolve(brokerFailure('broker_refused', 'the broker refused the message (nack)'));
          } else if (returned !== undefined) {
            resolve(brokerFailure('broker_refused', returned));
          } else {
            resolve(DELIVERED);
          }
        },
      );
    });
    return sent;
  }

  private async open(target: AmqpTarget, password: string | null): Promise<AmqpLink> {
    const address = await this.deps.guard.addressFor(target.host);
    // Loaded at the first AMQP destination: most processes never have one.
    const { connect } = await import('amqplib');
    const model = await connect(
      {
        protocol: target.tls ? 'amqps' : 'amqp',
        hostname: address,
        port: target.port,
        // amqplib's defaults (guest/guest) when the URL names no one.
        username: target.username === '' ? undefined : target.username,
        password: password ?? undefined,
        vhost: target.vhost,
        heartbeat: 30,
      },
      {
        timeout: this.deps.timeoutMs,
        noDelay: true,
        ...(target.tls ? this.deps.tlsOptions(target.host) : {}),
      },
    ).catch((error: unknown) => {
      throw vhostRefused(error, target.vhost);
    });
    let channel: ConfirmChannel;
    try {
      channel = await model.createConfirmChannel();
    } catch (error) {
      await closeModel(model, this.deps.timeoutMs);
      throw error;
    }
    const link: AmqpLink = { model, channel, blocked: null, closed: null, returned: new Map() };
    // The broker's close of the channel names an AMQP reply code (404 for an unknown exchange,
    // 403 for a refused permission): a refusal. Anything else is the connection failing.
    const closedBy = (error: unknown) => {
      const code = (error as { code?: unknown } | null)?.code;
      link.closed ??=
        typeof code === 'number' && code >= 300
          ? brokerFailure('broker_refused', brokerWords(error))
          : connectionFailure(error);
    };
    channel.on('error', closedBy);
    channel.on('close', () => closedBy(new Error('the broker closed the channel')));
    model.on('error', closedBy);
    model.on('close', () => closedBy(new Error('the broker closed the connection')));
    model.on('blocked', (reason: string) => {
      link.blocked = reason;
    });
    model.on('unblocked', () => {
      link.blocked = null;
    });
    channel.on('return', (returned: Message) => {
      const id = returned.properties.headers?.['service-request-id'];
      // A basic.return's fields: amqplib's types name only a consumed message's.
      const fields = returned.fields as unknown as ReturnFields;
      if (typeof id === 'string') {
        link.returned.set(
          id,
          `unroutable: ${fields.replyText ?? 'NO_ROUTE'} (no queue is bound to exchange '${fields.exchange}' with routing key '${fields.routingKey}')`,
        );
      }
    });
    return link;
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

/**
 * Closes a connection. Done once the close is answered, once the connection reports itself closed
 * (amqplib's close never settles when the socket ends while it waits for the answer), or after
 * `timeoutMs` of a broker's silence: a stopping worker is never held by a broker.
 */
function closeModel(model: ChannelModel, timeoutMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, timeoutMs);
    function done() {
      clearTimeout(timer);
      model.off('close', done);
      resolve();
    }
    model.once('close', done);
    // A rejection: closed already, by the broker or the network.
    model.close().then(done, done);
  });
}

/** The broker's reason as it gave it (amqplib quotes the server's close frame in its message). */
function brokerWords(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * RabbitMQ closes the connection as it opens a virtual host that does not exist or that the user
 * may not use; amqplib reports that close without its reply text, so the refusal is named here.
 */
function vhostRefused(error: unknown, vhost: string): unknown {
  const message = error instanceof Error ? error.message : '';
  if (!/^Expected ConnectionOpenOk; got <ConnectionClose/.test(message)) return error;
  return new BrokerRefusal(
    `the broker refused to open virtual host "${vhost}": it does not exist, or this user may not use it`,
  );
}
