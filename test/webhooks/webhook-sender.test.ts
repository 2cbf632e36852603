import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { expect } from 'chai';
import { WebhookSender } from '../../src/delivery/webhookSender.ts';

/**
 * The sender against real receivers on loopback that misbehave within a response: a body that stops
 * half-way, a body that never ends, an endless body. Every attempt must end, within the time limit, with
 * what the contract counts (a status only for a complete response or a complete excerpt).
 */
describe('the webhook sender with receivers that misbehave mid-response', function () {
  this.timeout(20_000);
  const TIMEOUT_MS = 600;
  let server: Server;
  let base: string;
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  let sender: WebhookSender;

  const routes: Record<string, (response: ServerResponse) => void> = {
    // Headers and part of the body, then silence.
    '/stalls': (response) => {
      response.writeHead(200, { 'content-length': '100' });
      response.write('partial');
    },
    // A chunked body that keeps coming, a little at a time, for ever.
    '/endless': (response) => {
      response.writeHead(200, { 'content-type': 'text/plain' });
      const timer = setInterval(() => response.write('x'.repeat(300)), 20);
      timers.add(timer);
      response.on('close', () => clearInterval(timer));
    },
    // A body cut off by the receiver closing the connection.
    '/cut': (response) => {
      response.writeHead(200, { 'content-length': '100' });
      response.write('partial', () => response.socket?.destroy());
    },
    '/ok': (response) => response.writeHead(200, { 'content-type': 'text/plain' }).end('thanks'),
  };

  before(async () => {
    server = createServer((request, response) => {
      request.resume();
      request.on('end', () => routes[request.url ?? '']!(response));
    });
    server.on('connection', (socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    sender = new WebhookSender({ timeoutMs: TIMEOUT_MS, connectionsPerEndpoint: 4, allowPrivateTargets: true });
  });

  after(async () => {
    await sender.close();
    for (const timer of timers) clearInterval(timer);
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const send = (path: string) => sender.send(`wh_${path.slice(1)}`, `${base}${path}`, '{}', { 'content-type': 'application/json' });

  it('fails a response whose body stops half-way once the time limit has passed, without a status', async () => {
    const result = await send('/stalls');
    expect(result).to.deep.include({ ok: false, statusCode: null, responseExcerpt: '' });
    expect(result.error).to.match(/^timeout/);
    expect(result.durationMs).to.be.within(TIMEOUT_MS - 10, TIMEOUT_MS + 400);
  });

  it('ends an endless body after its first KiB, with the status and a 1 KiB excerpt, well within the limit', async () => {
    const result = await send('/endless');
    expect(result).to.deep.include({ ok: true, statusCode: 200, error: null });
    expect(Buffer.byteLength(result.responseExcerpt)).to.equal(1024);
    expect(result.durationMs).to.be.below(TIMEOUT_MS);
  });

  it('fails a body cut off by the receiver, without a status', async () => {
    const result = await send('/cut');
    expect(result).to.deep.include({ ok: false, statusCode: null, responseExcerpt: '' });
    expect(result.error).not.to.match(/^timeout/);
  });

  it('keeps the whole of a short answer, and the pool goes on serving after all of the above', async () => {
    const results = await Promise.all([send('/ok'), send('/ok'), send('/ok')]);
    for (const result of results) expect(result).to.deep.include({ ok: true, statusCode: 200, error: null, responseExcerpt: 'thanks' });
  });
});
