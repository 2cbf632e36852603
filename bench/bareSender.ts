/**
 * Baseline of the delivery benchmark: the fastest a Node process can POST the same signed bodies, with the
 * headers of a delivery, to the same receiver with undici's Pool.request and a fixed number of concurrent
 * requests, with no database or queue behind it. Prints {"sent":N,"seconds":S,"cpuSeconds":C}, C being
 * this process's CPU (user + system) during the timed requests.
 */
import { createSecretKey } from 'node:crypto';
import { Pool } from 'undici';
import { signedRequest } from '../src/delivery/deliveryRequest.ts';

const url = new URL(process.env.TARGET_URL!);
const total = Number(process.env.COUNT ?? 20_000);
/** Requests sent before the timed ones, so that the baseline is measured warm, as the worker is. */
const warmup = Number(process.env.WARMUP ?? 0);
const concurrency = Number(process.env.CONCURRENCY ?? 16);
const key = createSecretKey(Buffer.from('ab'.repeat(32), 'utf8'));
const pool = new Pool(url.origin, { connections: concurrency });
const eventIdOf = (index: number) => `00000000-0000-7000-8000-${String(index).padStart(12, '0')}`;
const body = (index: number) =>
  JSON.stringify({
    type: 'phi.read',
    id: eventIdOf(index),
    timestamp: new Date().toISOString(),
    tenant_id: 'bench',
    actor: { user_id: 'u', user_role: 'r' },
    resource: { type: 'claim', id: 'c' },
    phi_involved: true,
    success: true,
    details: { reason: 'bench' },
    schema_version: '1',
  });

async function send(count: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const index = next++;
        // The headers of a real delivery (both signature schemes, event id, attempt), so that the receiver
        // parses as much as it does on the path.
        const request = signedRequest(body(index), eventIdOf(index), 1, { hmac: [key], ed25519: [], headers: [] });
        const response = await pool.request({ path: url.pathname, method: 'POST', headers: request.headers, body: request.body });
        await response.body.dump();
      }
    }),
  );
}

await send(warmup);
const started = performance.now();
const cpuBefore = process.cpuUsage();
await send(total);
const cpu = process.cpuUsage(cpuBefore);
const seconds = (performance.now() - started) / 1000;
await pool.close();
process.stdout.write(`${JSON.stringify({ sent: total, seconds, cpuSeconds: (cpu.user + cpu.system) / 1e6 })}\n`);
