/**
 * A webhook receiver for audit-trail deliveries, runnable as is:
 *
 *   WEBHOOK_SECRET=<secret from registration> npm run receiver   (listens on PORT, default 9000)
 *
 * (npm runs it on the project's Node 24, from node_modules/.bin, whatever the machine's own node is.)
 *
 * It verifies the signature over the raw bytes before parsing anything, answers quickly (2xx within 10 s
 * or the delivery is retried), and drops repeats: delivery is at least once, so the same (id, type) can
 * arrive more than once. A real receiver would hand the event to a queue and keep the seen-set in a
 * database with a TTL longer than the retry schedule (about 3 hours).
 */
import { createServer } from 'node:http';
import { verifyWebhookSignature } from '../src/client/index.ts';

const secret = process.env.WEBHOOK_SECRET;
if (!secret) {
  console.error('WEBHOOK_SECRET is required (the secret returned when the endpoint was registered)');
  process.exit(2);
}
const port = Number(process.env.PORT ?? 9000);
const seen = new Set<string>();

const server = createServer((request, response) => {
  if (request.method !== 'POST') {
    response.writeHead(405).end();
    return;
  }
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    const rawBody = Buffer.concat(chunks);
    const header = request.headers['x-service-signature'];
    const verdict = verifyWebhookSignature(secret, Array.isArray(header) ? header[0] : header, rawBody);
    if (!verdict.valid) {
      console.warn(`refused delivery: ${verdict.reason}`);
      response.writeHead(401).end();
      return;
    }
    const envelope = JSON.parse(rawBody.toString('utf8')) as { id: string; type: string; tenant_id: string; timestamp: string };
    const key = `${envelope.id}:${envelope.type}`;
    if (seen.has(key)) {
      response.writeHead(204).end();
      return;
    }
    seen.add(key);
    console.log(
      `${envelope.timestamp} ${envelope.tenant_id} ${envelope.type} ${envelope.id} (attempt ${request.headers['x-service-delivery-attempt']})`,
    );
    response.writeHead(204).end();
  });
});

server.listen(port, () => console.log(`receiver listening on http://127.0.0.1:${port}/`));
process.on('SIGTERM', () => server.close());
process.on('SIGINT', () => server.close());
