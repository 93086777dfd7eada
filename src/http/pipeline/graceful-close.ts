import type { Server, ServerResponse } from 'node:http';
import { Server as NetServer, type Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';

/** A connection idle this long while closing is closed: its client was not sending. */
const IDLE_GRACE_MS = 1_000;
const SWEEP_MS = 100;

/** Node's http server keeps the response being written on `_httpMessage` until it finishes. */
type HttpSocket = Socket & { _httpMessage?: ServerResponse | null };

/**
 * A graceful stop that loses no request: the listening socket closes at once, but no connection
 * is cut under a request. Every request that reaches an open connection is answered, with
 * `Connection: close` (so the connection ends after it); a connection is closed only once it has
 * stayed idle for a grace, since a client may be sending its next request right at the signal
 * (closing idle connections at once reset such requests). Node's own `server.close()` closes
 * idle connections on the spot, so the listening socket is closed without it.
 *
 * Before that, a drain (SHUTDOWN_DRAIN) can come first: the process still accepts and answers,
 * `/readyz` says `draining` so that load balancers stop sending, and every answer carries
 * `Connection: close` so that clients holding a connection to it (through a balancer that only
 * forwards connections) open their next one elsewhere.
 */
export class GracefulClose {
  private closing = false;
  private drainBegun = false;
  private readonly sockets = new Set<HttpSocket>();

  constructor(private readonly app: FastifyInstance) {
    (app.server as Server).on('connection', (socket: HttpSocket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    app.addHook('onRequest', (_request, reply, done) => {
      if (this.draining) reply.header('Connection', 'close');
      done();
    });
  }

  /** Whether a drain or the close has begun: the process is on its way out. */
  get draining(): boolean {
    return this.drainBegun || this.closing;
  }

  /** Begins the drain: nothing stops yet, but readiness is withdrawn. */
  beginDrain(): void {
    this.drainBegun = true;
  }

  /**
   * Stops accepting connections and resolves `true` once every connection has ended; those
   * still open after `timeoutMs` are destroyed and it resolves `false`.
   */
  async close(timeoutMs: number): Promise<boolean> {
    this.closing = true;
    const server = this.app.server as Server;
    const ended = new Promise<true>((resolve) => {
      if (!server.listening) resolve(true);
      // Resolves once the last connection has closed.
      else NetServer.prototype.close.call(server, () => resolve(true));
    });
    const idleSince = new Map<HttpSocket, number>();
    const sweep = () => {
      const now = Date.now();
      for (const socket of this.sockets) {
        const response = socket._httpMessage;
        if (response) {
          // Under way since before the signal: its answer still ends the connection.
          if (!response.headersSent) response.shouldKeepAlive = false;
          idleSince.delete(socket);
        } else if (now - (idleSince.get(socket) ?? now) >= IDLE_GRACE_MS) {
          socket.end();
        } else if (!idleSince.has(socket)) {
          idleSince.set(socket, now);
        }
      }
    };
    sweep();
    const sweeper = setInterval(sweep, SWEEP_MS);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    const clean = await Promise.race([ended, timedOut]);
    clearInterval(sweeper);
    clearTimeout(timer);
    if (!clean) for (const socket of this.sockets) socket.destroy();
    return clean;
  }
}
