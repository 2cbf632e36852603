import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { answerConnect, answerParserError } from './parserErrors.ts';

type RequestHandler = (request: IncomingMessage, response: ServerResponse) => void;

/**
 * One port of the service: an HTTP server for a Koa app's callback, with the shutdown a load-balanced pod
 * needs. While `closing()` is true every response carries `Connection: close`, so that keep-alive clients
 * open their next connection elsewhere instead of reusing one that is about to go away; after the drain
 * delay the server stops accepting, finishes what is in flight and closes the idle connections.
 */
export class HttpPort {
  private readonly server: Server;

  private constructor(server: Server) {
    this.server = server;
  }

  static async listen(handler: RequestHandler, host: string, port: number, closing: () => boolean): Promise<HttpPort> {
    const server = createServer((request, response) => {
      if (closing()) response.setHeader('Connection', 'close');
      handler(request, response);
    });
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
    return new HttpPort(server);
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** Stops accepting connections, lets in-flight requests finish within the grace period, then cuts the rest. */
  close(graceMs: number): Promise<void> {
    const server = this.server;
    return new Promise((resolve) => {
      const deadline = setTimeout(() => server.closeAllConnections(), graceMs).unref();
      // Keep-alive connections turn idle as their last response completes; close each one as it does,
      // rather than waiting for the client or the grace period.
      const sweeper = setInterval(() => server.closeIdleConnections(), 50).unref();
      server.close(() => {
        clearTimeout(deadline);
        clearInterval(sweeper);
        resolve();
      });
      server.closeIdleConnections();
    });
  }
}
