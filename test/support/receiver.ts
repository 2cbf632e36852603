import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** One request as a webhook receiver saw it: raw bytes, headers, arrival time. */
export interface ReceivedDelivery {
  readonly headers: IncomingMessage['headers'];
  readonly rawBody: Buffer;
  readonly receivedAt: number;
  json(): any;
}

/** What the receiver answers: a status, or 'hang' to never answer (until the test ends); delayMs answers that much later. */
export type Reply = number | 'hang' | { status: number; body?: string; headers?: Record<string, string>; delayMs?: number };

export interface TestReceiver {
  readonly url: string;
  readonly received: ReceivedDelivery[];
  /** Connections open to it now (a hung request holds one). */
  openConnections(): number;
  /** Changes the answer for requests from now on. */
  reply(answer: Reply | ((delivery: ReceivedDelivery) => Reply)): void;
  close(): Promise<void>;
}

/** A real HTTP receiver on an ephemeral loopback port. */
export async function startReceiver(initial: Reply = 204, path = '/hook'): Promise<TestReceiver> {
  let answer: Reply | ((delivery: ReceivedDelivery) => Reply) = initial;
  const received: ReceivedDelivery[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const rawBody = Buffer.concat(chunks);
      const delivery: ReceivedDelivery = {
        headers: request.headers,
        rawBody,
        receivedAt: Date.now(),
        json: () => JSON.parse(rawBody.toString('utf8')),
      };
      received.push(delivery);
      const reply = typeof answer === 'function' ? answer(delivery) : answer;
      if (reply === 'hang') return;
      const { status, body = '', headers = {}, delayMs = 0 } = typeof reply === 'number' ? { status: reply } : reply;
      if (delayMs === 0) response.writeHead(status, headers).end(body);
      // A slow receiver: the delay a test asked for is the behaviour being simulated.
      else setTimeout(() => response.writeHead(status, headers).end(body), delayMs);
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${path}`,
    received,
    openConnections: () => sockets.size,
    reply(next) {
      answer = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
