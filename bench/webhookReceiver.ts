/**
 * The receiver of the delivery benchmark, in its own process so that it does not share a CPU thread with
 * the driver. Paths: /ok answers 204, /body answers 200 with a 300-byte JSON body (what a receiver that
 * acknowledges with a body costs the delivery path: its excerpt is recorded), /fail answers 500, /hang never
 * answers. GET /stats returns what /ok and /body received: count and, with ?latencies=1, delivery latencies (receipt time − event timestamp, ms).
 * GET /reset clears it.
 */
import { createServer } from 'node:http';

// A receiver's typical acknowledgement, with a few multi-byte characters for the excerpt to keep whole.
const ACK_BODY = JSON.stringify({ received: true, note: 'accepted for processing — é', padding: 'x'.repeat(240) });
let latencies: number[] = [];
let firstAt = 0;
let lastAt = 0;

const server = createServer((request, response) => {
  if (request.method === 'GET') {
    if (request.url === '/reset') {
      latencies = [];
      firstAt = 0;
      lastAt = 0;
      response.writeHead(204).end();
      return;
    }
    // Latencies only when asked: polling the count must not cost the receiver (or the machine) anything.
    const body = { count: latencies.length, firstAt, lastAt, latencies: request.url === '/stats?latencies=1' ? latencies : [] };
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    return;
  }
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    if (request.url?.startsWith('/hang')) return;
    if (request.url?.startsWith('/fail')) {
      response.writeHead(500).end();
      return;
    }
    const now = Date.now();
    // The timestamp field is the first one after type and id; parsing the whole body is not needed.
    const match = /"timestamp":"([^"]+)"/.exec(Buffer.concat(chunks).toString('utf8'));
    if (match) latencies.push(now - Date.parse(match[1]!));
    if (firstAt === 0) firstAt = now;
    lastAt = now;
    if (request.url?.startsWith('/body')) response.writeHead(200, { 'content-type': 'application/json' }).end(ACK_BODY);
    else response.writeHead(204).end();
  });
});

server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address() as { port: number };
  process.stdout.write(`${JSON.stringify({ port: address.port })}\n`);
});
process.on('SIGTERM', () => process.exit(0));
