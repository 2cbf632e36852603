/**
 * Exports flat out, in a process of its own (bench/exportFairness.ts): BENCH_EXPORTERS loops each posting
 * exports to BENCH_EXPORT_URL with BENCH_EXPORT_KEY back to back and reading them whole as fast as they can,
 * waiting Retry-After after a 429 as the client package does, until SIGTERM; then one JSON line, the tally.
 *
 * Apart from the process that times the other tenant's lists: reading 10 MB answers at full speed kept
 * that process's event loop busy enough to show in the lister's latency, which is a cost of the benchmark,
 * not of the service (the exporting tenant's client runs on a machine of its own).
 */
import { Agent, request } from 'undici';

const url = process.env.BENCH_EXPORT_URL!;
const key = process.env.BENCH_EXPORT_KEY!;
const loops = Number(process.env.BENCH_EXPORTERS ?? 16);

const tally = { completed: 0, rows: 0, refused429: 0, failed503: 0, other: 0 };
const agent = new Agent({ connections: loops });
let stopped = false;

async function exportLoop(): Promise<void> {
  while (!stopped) {
    const response = await request(url, {
      method: 'POST',
      dispatcher: agent,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: '{}',
    });
    if (response.statusCode === 200) {
      let newlines = 0;
      // Counted natively (indexOf): a byte loop in JS over 10 MB an export is a cost of its own.
      for await (const chunk of response.body as AsyncIterable<Buffer>) {
        for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) newlines += 1;
      }
      tally.completed += 1;
      tally.rows += newlines;
      continue;
    }
    await response.body.dump();
    if (response.statusCode === 429) {
      tally.refused429 += 1;
      const wait = Number(response.headers['retry-after'] ?? 1) * 1000;
      await new Promise((resolve) => setTimeout(resolve, wait));
    } else if (response.statusCode === 503) tally.failed503 += 1;
    else tally.other += 1;
  }
}

const running = Array.from({ length: loops }, exportLoop);
process.once('SIGTERM', async () => {
  stopped = true;
  await Promise.all(running);
  await agent.close();
  process.stdout.write(`${JSON.stringify(tally)}\n`);
});
