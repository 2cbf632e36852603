/**
 * Export benchmark (issue 3): 10,000 rows as JSON and as NDJSON through POST /audit/export — time to last
 * byte and rows/s — against psql running `COPY (SELECT row_to_json(...) ... LIMIT 10000) TO STDOUT` of the
 * same rows in the same run; and how much the api's RSS grows during an export.
 *
 *   node bench/export.ts
 */
import { spawnSync } from 'node:child_process';
import { BIG_TENANT, LIST_DATABASE_URL, ensureListDataset } from './support/listDataset.ts';
import { startApiProcess } from './support/apiProcess.ts';
import { mintBenchKeys } from './support/keys.ts';
import { rssMb, sampleRss, stopProcess } from './support/processes.ts';
import { median } from '../test/support/statistics.ts';

const ROUNDS = 5;
await ensureListDataset((line) => console.error(line));
const keys = await mintBenchKeys(LIST_DATABASE_URL, [BIG_TENANT], ['audit:export']);
const api = await startApiProcess(LIST_DATABASE_URL);

// The newest 10,000 events of the big tenant stop at a millisecond boundary only by chance; the service
// may return a few fewer (it never splits a millisecond). COPY gets the same window: until = that cut.
async function exportOnce(format: 'json' | 'ndjson'): Promise<{ seconds: number; rows: number; bytes: number; rssGrowthMb: number }> {
  const before = rssMb(api.child.pid!);
  const rss = sampleRss(api.child.pid!);
  const started = performance.now();
  const response = await fetch(`${api.baseUrl}/api/v2/public/audit/export?format=${format}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${keys.get(BIG_TENANT)}`, 'content-type': 'application/json' },
    body: '{}',
  });
  const text = await response.text();
  const seconds = (performance.now() - started) / 1000;
  const peak = rss.stop();
  if (!response.ok) throw new Error(`export answered ${response.status}: ${text.slice(0, 200)}`);
  const rows = format === 'json' ? (JSON.parse(text) as { count: number }).count : text.trimEnd().split('\n').length;
  return { seconds, rows, bytes: text.length, rssGrowthMb: peak - before };
}

function copyOnce(): { seconds: number; bytes: number } {
  const sql = `COPY (SELECT row_to_json(ROW(e.event_id, to_char(e.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
      e.action, e.user_id, e.user_role, e.resource_type, e.resource_id, e.fields_accessed, e.phi_involved, e.tenant_id,
      e.source_ip, e.user_agent, e.justification, e.success, e.details)::audit_event_v2)
    FROM events e WHERE e.tenant_id = '${BIG_TENANT}' ORDER BY e.occurred_at DESC, e.event_id DESC LIMIT 10000) TO STDOUT`;
  const started = performance.now();
  const result = spawnSync('psql', [LIST_DATABASE_URL, '-X', '-q', '-c', sql], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
  const seconds = (performance.now() - started) / 1000;
  if (result.status !== 0) throw new Error(result.stderr);
  return { seconds, bytes: result.stdout.length };
}

await exportOnce('json'); // warm-up
const json: Awaited<ReturnType<typeof exportOnce>>[] = [];
const ndjson: Awaited<ReturnType<typeof exportOnce>>[] = [];
const copy: ReturnType<typeof copyOnce>[] = [];
for (let round = 0; round < ROUNDS; round += 1) {
  copy.push(copyOnce());
  json.push(await exportOnce('json'));
  ndjson.push(await exportOnce('ndjson'));
}
await stopProcess(api.child);

const copyRate = 10_000 / median(copy.map((run) => run.seconds));
const rate = (runs: typeof json) => median(runs.map((run) => run.rows / run.seconds));
console.log(
  JSON.stringify(
    {
      benchmark: 'export',
      command: 'node bench/export.ts',
      rows_per_export: json[0]!.rows,
      copy: {
        median_s: Number(median(copy.map((run) => run.seconds)).toFixed(3)),
        rows_per_s: Math.round(copyRate),
        bytes: copy[0]!.bytes,
      },
      json: {
        median_s: Number(median(json.map((run) => run.seconds)).toFixed(3)),
        rows_per_s: Math.round(rate(json)),
        ratio_vs_copy: Number((rate(json) / copyRate).toFixed(2)),
        bytes: json[0]!.bytes,
      },
      ndjson: {
        median_s: Number(median(ndjson.map((run) => run.seconds)).toFixed(3)),
        rows_per_s: Math.round(rate(ndjson)),
        ratio_vs_copy: Number((rate(ndjson) / copyRate).toFixed(2)),
        bytes: ndjson[0]!.bytes,
      },
      api_rss_growth_mb: Math.round(Math.max(...json.map((run) => run.rssGrowthMb), ...ndjson.map((run) => run.rssGrowthMb))),
      rounds: ROUNDS,
      goals: { ratio_vs_copy: '>= 0.50', api_rss_growth_mb: '< 50' },
    },
    null,
    2,
  ),
);
