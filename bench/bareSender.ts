/**
 * Baseline of the delivery benchmark: the fastest a Node process can POST the same signed bodies to the
 * same receiver with undici's Pool.request and a fixed number of concurrent requests, with no database
 * or queue behind it. Prints {"sent":N,"seconds":S}.
 */
import { Pool } from 'undici';
import { signDelivery } from '../src/webhooks/signature.ts';

const url = new URL(process.env.TARGET_URL!);
const total = Number(process.env.COUNT ?? 20_000);
/** Requests sent before the timed ones, so that the baseline is measured warm, as the worker is. */
const warmup = Number(process.env.WARMUP ?? 0);
const concurrency = Number(process.env.CONCURRENCY ?? 16);
const secret = 'ab'.repeat(32);
const pool = new Pool(url.origin, { connections: concurrency });
const body = (index: number) =>
  JSON.stringify({
    type: 'phi.read',
    id: `00000000-0000-7000-8000-${String(index).padStart(12, '0')}`,
    timestamp: new Date().toISOString(),
    tenant_id: 'bench',
    actor: { user_id: 'u', user_role: 'r' },
    resource: { type: 'claim', id: 'c' },
    phi_involved: true,
    success: true,
    details: {},
    schema_version: '1',
  });

async function send(count: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const index = next++;
        const payload = body(index);
        const response = await pool.request({
          path: url.pathname,
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-service-signature': signDelivery(secret, payload) },
          body: payload,
        });
        await response.body.dump();
      }
    }),
  );
}

await send(warmup);
const started = performance.now();
await send(total);
const seconds = (performance.now() - started) / 1000;
await pool.close();
process.stdout.write(`${JSON.stringify({ sent: total, seconds })}\n`);
