/**
 * Export fairness benchmark (issue 28): one tenant runs exports flat out, as many at once as it can open,
 * while another lists its events at a steady 10 requests a second. The lister's p99 with the exports
 * running, against the same load without them measured in the same run (before and after), should stay
 * within 2×, and the lister should get no 503.
 *
 *   node bench/exportFairness.ts            (node bench/run.ts export-fairness)
 *
 * The api runs as the image runs it (the built CLI, `serve --roles api`) with its default pools and
 * long-read caps (LONG_READS_PER_TENANT 2, LONG_READS_PER_POD 4); only the per-key rate limits are raised,
 * so that nothing but the long-read admission holds the exporter back (a tenant may hold many keys). The
 * exporter runs BENCH_EXPORTERS loops (16), each posting 10,000-event exports of the big tenant of the list
 * dataset back to back and reading them whole as fast as it can, waiting Retry-After after a 429 as the
 * client package does. BENCH_PHASE_S (30) seconds per phase: baseline, exports, baseline.
 */
import { Agent, request } from 'undici';
import { BIG_TENANT, LIST_DATABASE_URL, ensureListDataset } from './support/listDataset.ts';
import { startApiProcess } from './support/apiProcess.ts';
import { mintBenchKeys } from './support/keys.ts';
import { type LoadResult, pacedLoad } from './support/load.ts';
import { sampleRss, stopProcess } from './support/processes.ts';

const PHASE_S = Number(process.env.BENCH_PHASE_S ?? 30);
const EXPORTERS = Number(process.env.BENCH_EXPORTERS ?? 16);
const LIST_RATE = 10;
const LISTER = 'tenant-0003';

await ensureListDataset((line) => console.error(line));
const exporterKeys = await mintBenchKeys(LIST_DATABASE_URL, [BIG_TENANT], ['audit:export']);
const listerKeys = await mintBenchKeys(LIST_DATABASE_URL, [LISTER], ['audit:read']);
const api = await startApiProcess(LIST_DATABASE_URL);

const list = (): Promise<LoadResult> =>
  pacedLoad({
    url: api.baseUrl,
    nextRequest: () => ({ path: '/api/v2/public/audit/events?limit=100', headers: { authorization: `Bearer ${listerKeys.get(LISTER)}` } }),
    connections: 8,
    durationS: PHASE_S,
    rate: LIST_RATE,
  });

interface ExportTally {
  completed: number;
  rows: number;
  refused429: number;
  failed503: number;
  other: number;
}

/** EXPORTERS loops of back-to-back exports until stopped. */
function exportFlatOut(): { stop(): Promise<ExportTally> } {
  const tally: ExportTally = { completed: 0, rows: 0, refused429: 0, failed503: 0, other: 0 };
  const agent = new Agent({ connections: EXPORTERS });
  let stopped = false;
  const loop = async () => {
    while (!stopped) {
      const response = await request(`${api.baseUrl}/api/v2/public/audit/export?format=ndjson`, {
        method: 'POST',
        dispatcher: agent,
        headers: { authorization: `Bearer ${exporterKeys.get(BIG_TENANT)}`, 'content-type': 'application/json' },
        body: '{}',
      });
      if (response.statusCode === 200) {
        let newlines = 0;
        // Counted natively (indexOf): a byte loop in JS over 10 MB an export kept this process's event loop,
        // which also times the lister's requests, busy enough to show in the lister's latency.
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
  };
  const loops = Array.from({ length: EXPORTERS }, loop);
  return {
    async stop() {
      stopped = true;
      await Promise.all(loops);
      await agent.close();
      return tally;
    },
  };
}

// Warm-up: plans, connections, the key cache.
await pacedLoad({
  url: api.baseUrl,
  nextRequest: () => ({ path: '/api/v2/public/audit/events?limit=100', headers: { authorization: `Bearer ${listerKeys.get(LISTER)}` } }),
  connections: 4,
  durationS: 3,
  rate: LIST_RATE,
});

const before = await list();
const rss = sampleRss(api.child.pid!);
const exports = exportFlatOut();
// Let the exports fill every slot they can take before the lister's clock starts.
await new Promise((resolve) => setTimeout(resolve, 2_000));
const during = await list();
const tally = await exports.stop();
const peakRssMb = rss.stop();
const after = await list();
await stopProcess(api.child);

const baselineP99 = (before.p99 + after.p99) / 2;
const summary = (result: LoadResult) => ({
  p50_ms: result.p50,
  p99_ms: result.p99,
  requests: Object.values(result.statuses ?? {}).reduce((sum, count) => sum + count, 0),
  statuses: result.statuses,
  errors: result.errors,
});
console.log(
  JSON.stringify(
    {
      benchmark: 'export-fairness',
      command: 'node bench/exportFairness.ts',
      phase_s: PHASE_S,
      exporter_loops: EXPORTERS,
      lister_rate_per_s: LIST_RATE,
      lister_before: summary(before),
      lister_with_exports: summary(during),
      lister_after: summary(after),
      lister_p99_ratio_vs_baseline: Number((during.p99 / baselineP99).toFixed(2)),
      lister_503: during.statuses?.[503] ?? 0,
      exports: { ...tally, per_s: Number((tally.completed / (PHASE_S + 2)).toFixed(2)) },
      api_peak_rss_mb: Math.round(peakRssMb),
      goals: { lister_p99_ratio_vs_baseline: '<= 2', lister_503: 0 },
    },
    null,
    2,
  ),
);
