import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Server as NetServer, type AddressInfo, type Socket } from 'node:net';
import { sleep } from '../platform/sleep.ts';
import { answerConnect, answerParserError } from './parserErrors.ts';

type RequestHandler = (request: IncomingMessage, response: ServerResponse) => void;

/**
 * How long a connection must have been idle (no request in flight, none begun) before a closing port closes
 * it. A client that has just connected sends its request within a round trip; a connection quiet for this
 * long is one no request is on its way over, so closing it cannot cross one (the reset a client could not
 * tell from a lost answer). A kept-alive connection that has already carried requests waits at most as long
 * as the drain delay: its client has had that long to be told `Connection: close`, and a process stopped
 * without a drain delay (tests, a single process with nothing in front) closes it at once.
 */
const IDLE_CLOSE_MS = 1_000;

/**
 * Before the listener closes, requests are held (not answered) until no connection has been accepted for
 * QUIET_MS and none but held ones are in flight, at most HOLD_MS in all (a long export does not hold the
 * rest for longer). Every answer of the drain says `Connection: close`, so a client that
 * gets one connects again at once; closing the listener while such a connection waits in the kernel's accept
 * queue resets it (the client may have sent its request on it). Held, a client has its answer still to come
 * and does not connect; once the queue is quiet the listener closes, and the held requests are answered.
 */
const QUIET_MS = 30;
const HOLD_MS = 2_000;

/**
 * Resolves in the turn's check phase, after its poll phase has accepted every connection the kernel queued.
 * A timer fires before the poll phase of its turn, and the drain's first look comes straight after the drain
 * delay: after the process was kept off the CPU, a queue judged quiet then was a stale view, and the connections
 * completed meanwhile (up to 29 in a suite run on a busy machine, seen queued with `ss`) were reset when the
 * listener closed.
 */
function afterAccepting(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** What the port knows of a connection while it closes: whether a request is in flight, and since when not. */
interface ConnectionState {
  busy: boolean;
  /** It has carried a request (a kept-alive connection), rather than being just accepted. */
  served: boolean;
  /** Its request is held until the listener has closed. */
  held: boolean;
  idleSince: number;
}

/**
 * One port of the service: an HTTP server for a Koa app's callback, with the shutdown a load-balanced pod
 * needs. While `closing()` is true every response carries `Connection: close`, so that keep-alive clients
 * open their next connection elsewhere instead of reusing one that is about to go away, and the socket is
 * closed right after that response; after the drain delay the server stops accepting, finishes what is in
 * flight and closes each remaining connection once it has been idle for IDLE_CLOSE_MS (docs/operations.md
 * "Shutdown and draining"): zero resets, even for clients that hammer the port without a load balancer.
 */
export class HttpPort {
  private readonly server: Server;
  private readonly connections = new Map<Socket, ConnectionState>();
  /** Requests that arrived while the listener was about to close, answered once it has. */
  private held: Array<() => void> | undefined;
  private lastAcceptedAt = performance.now();

  private constructor(server: Server) {
    this.server = server;
  }

  static async listen(handler: RequestHandler, host: string, port: number, closing: () => boolean): Promise<HttpPort> {
    let port_: HttpPort | undefined;
    const server = createServer((request, response) => {
      if (closing()) response.setHeader('Connection', 'close');
      const state = port_!.track(request, response);
      if (!port_!.held) return handler(request, response);
      if (state) state.held = true;
      port_!.held.push(() => {
        if (state) state.held = false;
        handler(request, response);
      });
    });
    server.on('connection', (socket: Socket) => port_!.accepted(socket));
    // What the parser refuses, and CONNECT, get the JSON error shape too (parserErrors.ts).
    server.on('clientError', answerParserError);
    server.on('connect', answerConnect);
    // Keep-alive longer than typical load balancer idle timeouts, so the balancer closes first.
    server.keepAliveTimeout = 65_000;
    server.headersTimeout = 66_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    port_ = new HttpPort(server);
    return port_;
  }

  private accepted(socket: Socket): void {
    this.lastAcceptedAt = performance.now();
    this.connections.set(socket, { busy: false, served: false, held: false, idleSince: this.lastAcceptedAt });
    socket.once('close', () => this.connections.delete(socket));
  }

  private track(request: IncomingMessage, response: ServerResponse): ConnectionState | undefined {
    const state = this.connections.get(request.socket);
    if (!state) return undefined;
    state.busy = true;
    state.served = true;
    response.once('close', () => {
      state.busy = false;
      state.idleSince = performance.now();
    });
    return state;
  }

  /**
   * Whether a client may still connect again soon: a connection was accepted within QUIET_MS, or a request
   * is being answered (its client, told `Connection: close`, will connect again once it has the answer).
   */
  private stirring(): boolean {
    if (performance.now() - this.lastAcceptedAt < QUIET_MS) return true;
    for (const state of this.connections.values()) if (state.busy && !state.held) return true;
    return false;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /**
   * Holds new requests until the accept queue is quiet, stops accepting, answers the held requests, lets
   * in-flight requests finish within the grace period, closes each other connection once idle for
   * IDLE_CLOSE_MS (a kept-alive one for at most `drainDelayMs`; all at once when the grace period is
   * shorter), then cuts the rest.
   */
  async close(graceMs: number, drainDelayMs: number): Promise<void> {
    const { server, connections } = this;
    const started = performance.now();
    this.held = [];
    const holdUntil = started + Math.min(HOLD_MS, graceMs / 2);
    let lateMs = 0;
    do {
      await afterAccepting();
      // Just after the process was kept off the CPU, clients on the same machine may have been too, their
      // connections not yet made: the queue is looked at again before it counts as quiet.
      if (lateMs < QUIET_MS && !this.stirring()) break;
      const asleepAt = performance.now();
      await sleep(QUIET_MS / 3);
      lateMs = performance.now() - asleepAt - QUIET_MS / 3;
    } while (performance.now() < holdUntil);
    const freshIdleMs = Math.min(IDLE_CLOSE_MS, graceMs);
    const keptAliveIdleMs = Math.min(freshIdleMs, drainDelayMs);
    const closed = new Promise<void>((resolve) => {
      const deadline = setTimeout(() => server.closeAllConnections(), Math.max(0, graceMs - (performance.now() - started))).unref();
      const closeQuietConnections = () => {
        const now = performance.now();
        for (const [socket, state] of connections) {
          const idleMs = state.served ? keptAliveIdleMs : freshIdleMs;
          if (!state.busy && state.idleSince <= now - idleMs) socket.destroy();
        }
      };
      const sweeper = setInterval(closeQuietConnections, 50).unref();
      // net.Server's close, not http.Server's: that one also closes every idle connection at once, including
      // one just accepted whose request is on its way, which the client then sees reset.
      NetServer.prototype.close.call(server, () => {
        clearTimeout(deadline);
        clearInterval(sweeper);
        resolve();
      });
      closeQuietConnections();
    });
    const held = this.held;
    this.held = undefined;
    for (const answer of held) answer();
    await closed;
  }
}
