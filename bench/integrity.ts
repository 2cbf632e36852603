/**
 * Proof and verification benchmark (issue 18), on a tenant with 2,000,000 sealed events:
 *   - GET /audit/events/{id}/proof for random events through the api process (sequential, after a
 *     warm-up): p50 and p99, goal p99 < 10 ms; beside it, GET /audit/events/{id} of the same events;
 *   - the export of the newest 10,000 events with proofs=true, then `audit-trail verify` on it as a
 *     customer runs it (a fresh process: start-up included), goal < 2 s; the verification alone in-process.
 * The dataset (database audit_bench_integrity) is generated in Postgres and sealed once by an in-process
 * sealer, whose rate is reported; it is kept between runs.
 *
 *   node bench/integrity.ts
 */
import { spawnSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { verifyExport } from '../src/client/exportVerifier.ts';
import { Database } from '../src/db/database.ts';
import { createDatabaseIfMissing, migrate } from '../src/db/migrate.ts';
import { EVENT_JSON } from '../src/events/eventDocument.ts';
import { Sealer } from '../src/integrity/sealer.ts';
import { TreeHeadSigner } from '../src/integrity/treeHeadSigner.ts';
import { createLogger } from '../src/platform/logger.ts';
import { startApiProcess } from './support/apiProcess.ts';
import { mintBenchKeys } from './support/keys.ts';
import { SERVER_URL } from './support/listDataset.ts';
import { builtCli, stopProcess } from './support/processes.ts';

const DATABASE_URL = `${SERVER_URL}/audit_bench_integrity`;
const TENANT = 'tenant-proofs';
const EVENTS = 2_000_000;
const DATASET = 'integrity-v1';
const PROOFS = 2_000;
const log = (line: string) => console.error(line);

async function ensureDataset(): Promise<{ sealRate: number | undefined }> {
  await createDatabaseIfMissing(DATABASE_URL);
  await migrate(DATABASE_URL, createLogger('warn'));
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    await client.query(
      'CREATE TABLE IF NOT EXISTS bench_datasets (name text PRIMARY KEY, rows bigint NOT NULL, loaded_at timestamptz NOT NULL DEFAULT now())',
    );
    if ((await client.query('SELECT 1 FROM bench_datasets WHERE name = $1', [DATASET])).rowCount) {
      log(`dataset ${DATASET} present`);
      return { sealRate: undefined };
    }
    if (Number((await client.query('SELECT count(*) FROM events')).rows[0].count) > 0) {
      throw new Error('audit_bench_integrity holds a partial dataset: drop the database and run again');
    }
    const started = Date.now();
    for (let day = 0; day <= 62; day += 28)
      await client.query('SELECT audit_ensure_event_partition(now() - make_interval(days => $1))', [day]);
    const chunk = 250_000;
    for (let offset = 0; offset < EVENTS; offset += chunk) {
      await client.query(
        `INSERT INTO events (tenant_id, occurred_at, event_id, action, user_id, user_role, resource_type, resource_id,
                             fields_accessed, phi_involved, source_ip, user_agent, justification, success, details, document)
         SELECT e.*, ${EVENT_JSON}
         FROM (SELECT '${TENANT}' AS tenant_id, date_trunc('milliseconds', now()) - interval '60 days' + n * interval '2 milliseconds' AS occurred_at, gen_random_uuid() AS event_id,
                      (ARRAY['phi.read','phi.query','auth.login','admin.key.create'])[1 + n % 4] AS action, 'user-' || (n % 5000) AS user_id,
                      'clinician' AS user_role, 'patient_record' AS resource_type, 'p-' || n AS resource_id, '["diagnosis"]' AS fields_accessed,
                      true AS phi_involved, '10.1.2.3' AS source_ip, 'bench-agent/1.0' AS user_agent, '' AS justification, true AS success,
                      '{"ward":"' || (n % 40) || '"}' AS details
                 FROM generate_series($1::bigint, $2::bigint) AS n OFFSET 0) AS e`,
        [offset, offset + chunk - 1],
      );
      log(`  loaded ${offset + chunk} events`);
    }
    log(`loaded in ${((Date.now() - started) / 1000).toFixed(0)} s; sealing`);
    const db = new Database({ url: DATABASE_URL, poolSize: 2, applicationName: 'bench sealer', log: createLogger('warn') });
    const signer = new TreeHeadSigner(generateKeyPairSync('ed25519').privateKey);
    const sealer = new Sealer({ db, signer, intervalMs: 10_000, heartbeatMs: 3_600_000, log: createLogger('warn') });
    await sealer.registerKey();
    const sealStarted = performance.now();
    let sealed = 0;
    while (sealed < EVENTS) sealed += (await sealer.sealPass()).sealed;
    const sealRate = Math.round(sealed / ((performance.now() - sealStarted) / 1000));
    await db.close();
    await client.query('ANALYZE');
    await client.query('INSERT INTO bench_datasets (name, rows) VALUES ($1, $2)', [DATASET, EVENTS]);
    log(`sealed ${sealed} events at ${sealRate} events/s`);
    return { sealRate };
  } finally {
    await client.end();
  }
}

const { sealRate } = await ensureDataset();
const key = (await mintBenchKeys(DATABASE_URL, [TENANT], ['audit:read', 'audit:export'])).get(TENANT)!;
const client = new pg.Client({ connectionString: DATABASE_URL });
await client.connect();
const { rows: sample } = await client.query(
  `SELECT event_id::text FROM merkle_leaves WHERE tenant_id = $1 AND leaf_index = ANY($2::bigint[])`,
  [TENANT, Array.from({ length: PROOFS + 200 }, () => Math.floor(Math.random() * EVENTS))],
);
await client.end();

const api = await startApiProcess(DATABASE_URL);
const headers = { authorization: `Bearer ${key}` };
const base = `${api.baseUrl}/api/v2/public`;
const head = (await (await fetch(`${base}/audit/integrity/tree-head`, { headers })).json()) as { tree_size: number };
/** Sequential GETs of a path per sampled event, after 200 of warm-up: latencies sorted, in ms. */
async function latencies(path: (eventId: string) => string): Promise<number[]> {
  const measured: number[] = [];
  for (const [index, { event_id: eventId }] of sample.entries()) {
    const started = performance.now();
    const response = await fetch(`${base}${path(eventId)}`, { headers });
    await response.arrayBuffer();
    if (!response.ok) throw new Error(`${path(eventId)} answered ${response.status}`);
    if (index >= 200) measured.push(performance.now() - started);
  }
  return measured.sort((a, b) => a - b);
}
const percentile = (sorted: number[], p: number) =>
  Number(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!.toFixed(2));
// Baseline in the same run: the lookup of the same events, the cheapest authenticated read of the API.
const lookups = await latencies((eventId) => `/audit/events/${eventId}`);
const proofs = await latencies((eventId) => `/audit/events/${eventId}/proof`);

const dir = mkdtempSync(join(tmpdir(), 'audit-bench-verify-'));
const exportStarted = performance.now();
const exported = await fetch(`${base}/audit/export?format=ndjson&proofs=true`, {
  method: 'POST',
  headers: { ...headers, 'content-type': 'application/json' },
  body: '{}',
});
const exportText = await exported.text();
const exportSeconds = (performance.now() - exportStarted) / 1000;
const plainStarted = performance.now();
await (
  await fetch(`${base}/audit/export?format=ndjson`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: '{}',
  })
).text();
const plainSeconds = (performance.now() - plainStarted) / 1000;
const keys = await (await fetch(`${base}/audit/integrity/keys`, { headers })).text();
await stopProcess(api.child);
writeFileSync(join(dir, 'export.ndjson'), exportText);
writeFileSync(join(dir, 'keys.json'), keys);

const cliStarted = performance.now();
const cli = spawnSync(
  process.execPath,
  builtCli('verify', '--export', join(dir, 'export.ndjson'), '--public-key', join(dir, 'keys.json')),
  { encoding: 'utf8' },
);
const cliSeconds = (performance.now() - cliStarted) / 1000;
if (cli.status !== 0) throw new Error(`verify failed: ${cli.stderr}`);
const inProcessStarted = performance.now();
const report = verifyExport({ exportText, trustedKeys: JSON.parse(keys).keys });
const inProcessSeconds = (performance.now() - inProcessStarted) / 1000;
rmSync(dir, { recursive: true, force: true });

console.log(
  JSON.stringify(
    {
      benchmark: 'integrity',
      command: 'node bench/integrity.ts',
      tree_size: head.tree_size,
      sealing_rate_events_per_s: sealRate ?? 'dataset already sealed',
      proof_latency_ms: {
        requests: proofs.length,
        p50: percentile(proofs, 50),
        p99: percentile(proofs, 99),
        max: Number(proofs.at(-1)!.toFixed(2)),
      },
      lookup_latency_ms_baseline: { p50: percentile(lookups, 50), p99: percentile(lookups, 99) },
      export_10000_with_proofs: {
        events: report.events,
        proven: report.proven,
        bytes: exportText.length,
        seconds: Number(exportSeconds.toFixed(2)),
        plain_export_seconds: Number(plainSeconds.toFixed(2)),
      },
      verify_10000: {
        cli_seconds_including_start: Number(cliSeconds.toFixed(2)),
        in_process_seconds: Number(inProcessSeconds.toFixed(2)),
        cli_summary: cli.stdout.trim(),
      },
      goals: { proof_p99_ms: '< 10', verify_10000_s: '< 2' },
    },
    null,
    2,
  ),
);
