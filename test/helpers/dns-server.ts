import { createSocket, type Socket } from 'node:dgram';

/**
 * A DNS server on 127.0.0.1 (UDP) for resolver tests: answers A queries from `table`, AAAA and
 * other types with no answer, unknown names NXDOMAIN, and never answers names in `silent`.
 */
export class DnsServer {
  /** Queries received, by name. */
  readonly queries: string[] = [];

  private constructor(
    private readonly socket: Socket,
    readonly port: number,
  ) {}

  static async start(table: Record<string, string>, silent: string[] = []): Promise<DnsServer> {
    const socket = createSocket('udp4');
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
    const server = new DnsServer(socket, socket.address().port);
    socket.on('message', (query, peer) => {
      const { name, type, end } = question(query);
      server.queries.push(name);
      if (silent.includes(name)) return;
      const address = table[name];
      const found = address !== undefined;
      const answers =
        found && type === 1
          ? Buffer.concat([
              // A pointer to the question's name, type A, class IN, TTL 60, 4 bytes of address.
              Buffer.from([0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]),
              Buffer.from(address.split('.').map(Number)),
            ])
          : Buffer.alloc(0);
      const header = Buffer.alloc(12);
      query.copy(header, 0, 0, 2); // id
      header.writeUInt16BE(0x8180 | (found ? 0 : 3), 2); // response, recursion; NXDOMAIN when unknown
      header.writeUInt16BE(1, 4);
      header.writeUInt16BE(answers.length > 0 ? 1 : 0, 6);
      socket.send(
        Buffer.concat([header, query.subarray(12, end), answers]),
        peer.port,
        peer.address,
      );
    });
    return server;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.socket.close(() => resolve()));
  }
}

/** The first question of a query: its name, its type and where it ends. */
function question(query: Buffer): { name: string; type: number; end: number } {
  const labels: string[] = [];
  let at = 12;
  while (query[at] !== 0) {
    labels.push(query.toString('ascii', at + 1, at + 1 + query[at]));
    at += query[at] + 1;
  }
  return { name: labels.join('.').toLowerCase(), type: query.readUInt16BE(at + 1), end: at + 5 };
}
