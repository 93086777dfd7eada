import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

export interface ReceivedMail {
  from: string | null;
  rcptTo: string[];
  /** The message as sent: headers, blank line, body. */
  raw: string;
}

/** A real SMTP server on 127.0.0.1 (plain, no auth) that keeps every message. */
export class SmtpReceiver {
  readonly messages: ReceivedMail[] = [];
  /** SMTP connections accepted so far. */
  connections = 0;

  private constructor(
    private readonly server: SMTPServer,
    readonly port: number,
  ) {}

  static async start(): Promise<SmtpReceiver> {
    let receiver: SmtpReceiver | null = null;
    const server = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS'],
      logger: false,
      onConnect(_session, callback) {
        if (receiver) receiver.connections += 1;
        callback();
      },
      onData(stream, session, callback) {
        const chunks: Buffer[] = [];
        stream.on('data', (chunk: Buffer) => chunks.push(chunk));
        stream.on('end', () => {
          const { mailFrom, rcptTo } = session.envelope;
          receiver?.messages.push({
            from: mailFrom ? mailFrom.address : null,
            rcptTo: rcptTo.map((rcpt) => rcpt.address),
            raw: Buffer.concat(chunks).toString('utf8'),
          });
          callback();
        });
      },
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    receiver = new SmtpReceiver(server, (server.server.address() as AddressInfo).port);
    return receiver;
  }

  get url(): string {
    return `smtp://127.0.0.1:${this.port}`;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
