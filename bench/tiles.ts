/**
 * Tiles benchmark (issue 45), on a tenant log of 1,000,000 sealed events:
 *   - a monitor reading the log from the start: every hash tile, then every entry bundle, 8 requests in
 *     flight over keep-alive, from the api process (API key, rate limiter, Postgres) and from a bare static
 *     file server serving the same tiles from disk (bench/baseline/staticFileServer.ts, over the copy
 *     `integrity publish` wrote). Goal: the API at ≥ 0.5× the static server's rate. The api process is
 *     started afresh for each round, so its first pass finds no tile in memory (a monitor's first read);
 *     before it, the api serves as many partial tiles, which it never keeps, so that V8 has compiled its
 *     request path as in a pod that has been serving (the static server is warm too). A second pass, warm,
 *     is reported beside it, and the first read by a process just started, its code not compiled yet.
 *     Entry bundles are kept in Postgres once built (migration
 *     031; `integrity publish` builds them all first), so the rounds read kept bundles; a last pass reads them
 *     after the kept ones were removed (as after a redaction or an expiry), as the first monitor ever does.
 *     Beside the rates, the CPU each side spent per request (the static server; the api process and its
 *     Postgres backends), which a shared machine's load distorts far less.
 *   - proof of inclusion from tiles by the Go checksum database client (test/support/go/tlogclient.go):
 *     the tile requests it makes per level for random leaves. Goal: at most 2 per level.
 * The dataset (database audit_bench_tiles) is generated in Postgres and sealed once; it is kept between runs.
 *
 *   node bench/tiles.ts
 */
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { Database } from '../src/db/database.ts';
import { createDatabaseIfMissing, migrate } from '../src/db/migrate.ts';
import { EVENT_JSON } from '../src/events/eventDocument.ts';
import { Sealer } from '../src/integrity/sealer.ts';
import { publishStaticLog } from '../src/integrity/staticLog.ts';
import { directorySink } from '../src/integrity/staticLogSinks.ts';
import { tilesBetween, tlogTilePath } from '../src/integrity/tlogTiles.ts';
import { TransparencyLog } from '../src/integrity/transparencyLog.ts';
import { TreeHeadSigner } from '../src/integrity/treeHeadSigner.ts';
import { createLogger } from '../src/platform/logger.ts';
import { runGoTlogClient } from '../test/support/go-tlog-client.ts';
import { startApiProcess } from './support/apiProcess.ts';
import { mintBenchKeys } from './support/keys.ts';
import { SERVER_URL } from './support/listDataset.ts';
import { freePort, imageNodeFlags, startNode, stopProcess, waitForHttp } from './support/processes.ts';

const DATABASE_URL = `${SERVER_URL}/audit_bench_tiles`;
const TENANT = 'tenant-tiles';
const EVENTS = 1_000_000;
const DATASET = 'tiles-v1';
const IN_FLIGHT = 8;
const ROUNDS = 3;
const log = (line: string) => console.error(line);

async function ensureDataset(): Promise<void> {
  await createDatabaseIfMissing(DATABASE_URL);
  await migrate(DATABASE_URL, createLogger('warn'));
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    await client.query('CREATE TABLE IF NOT EXISTS bench_datasets (name text PRIMARY KEY, loaded_at timestamptz NOT NULL DEFAULT now())');
    if ((await client.query('SELECT 1 FROM bench_datasets WHERE name = $1', [DATASET])).rowCount) return;
    if (Number((await client.query('SELECT count(*) FROM events')).rows[0].count) > 0) {
      throw new Error('audit_bench_tiles holds a partial dataset: drop the database and run again');
    }
    for (let day = 0; day <= 62; day += 28)
      await client.query('SELECT audit_ensure_event_partition(now() - make_interval(days => $1))', [day]);
    for (let offset = 0; offset < EVENTS; offset += 250_000) {
      await client.query(
        `INSERT INTO events (tenant_id, occurred_at, event_id, action, user_id, user_role, resource_type, resource_id,
                             fields_accessed, phi_involved, source_ip, user_agent, justification, success, details, document)
         SELECT e.*, ${EVENT_JSON}
         FROM (SELECT '${TENANT}' AS tenant_id, date_trunc('milliseconds', now()) - interval '40 days' + n * interval '2 milliseconds' AS occurred_at,
                      gen_random_uuid() AS event_id, (ARRAY['phi.read','phi.query','auth.login'])[1 + n % 3] AS action, 'user-' || (n % 5000) AS user_id,
                      'clinician' AS user_role, 'patient_record' AS resource_type, 'p-' || n AS resource_id, '["diagnosis"]' AS fields_accessed,
                      true AS phi_involved, '10.1.2.3' AS source_ip, 'bench-agent/1.0' AS user_agent, '' AS justification, true AS success,
                      '{"ward":"' || (n % 40) || '"}' AS details
                 FROM generate_series($1::bigint, $2::bigint) AS n OFFSET 0) AS e`,
        [offset, offset + 249_999],
      );
      log(`  loaded ${offset + 250_000} events`);
    }
    const db = new Database({ url: DATABASE_URL, poolSize: 2, applicationName: 'bench sealer', log: createLogger('warn') });
    const sealer = new Sealer({
      db,
      signer: new TreeHeadSigner(generateKeyPairSync('ed25519').privateKey),
      intervalMs: 10_000,
      heartbeatMs: 3_600_000,
      log: createLogger('warn'),
    });
    await sealer.registerKey();
    let sealed = 0;
    while (sealed < EVENTS) sealed += (await sealer.sealPass()).sealed;
    await db.close();
    await client.query('INSERT INTO bench_datasets (name) VALUES ($1)', [DATASET]);
    log(`sealed ${sealed} events`);
  } finally {
    await client.end();
  }
}

/** CPU seconds (user and system) a process has used so far, from /proc (Linux, 100 ticks a second); 0 once gone. */
function cpuSeconds(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

/**
 * Fetches every path with IN_FLIGHT requests at a time; returns requests per second, bytes, and the CPU the
 * serving processes (`serving()`, asked before and after: the api's Postgres backends may open meanwhile) spent
 * per request, in µs. CPU says more than rates on a shared machine, where every process competes for the cores.
 */
async function readAll(
  base: string,
  paths: readonly string[],
  headers: Record<string, string>,
  serving: () => Promise<number[]>,
): Promise<{ rate: number; bytes: number; cpu: number }> {
  let next = 0;
  let bytes = 0;
  const cpuBefore = new Map((await serving()).map((pid) => [pid, cpuSeconds(pid)]));
  const started = performance.now();
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < paths.length) {
        const path = paths[next++]!;
        const response = await fetch(`${base}/${path}`, { headers });
        if (response.status !== 200) throw new Error(`GET ${path}: ${response.status}`);
        // Awaited first: `bytes += await …` would read `bytes` before the wait and lose the others' additions.
        const body = await response.arrayBuffer();
        bytes += body.byteLength;
      }
    }),
  );
  const rate = paths.length / ((performance.now() - started) / 1000);
  const cpu = (await serving()).reduce((sum, pid) => sum + cpuSeconds(pid) - (cpuBefore.get(pid) ?? 0), 0);
  return { rate, bytes, cpu: (cpu / paths.length) * 1e6 };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const fixed = (value: number) => value.toFixed(2);

await ensureDataset();
const key = (await mintBenchKeys(DATABASE_URL, [TENANT], ['audit:read'])).get(TENANT)!;
const copy = mkdtempSync(join(tmpdir(), 'audit-bench-tiles-'));
const db = new Database({ url: DATABASE_URL, poolSize: 2, applicationName: 'bench publish', log: createLogger('warn') });
const published = await publishStaticLog(new TransparencyLog(db), TENANT, directorySink(copy), true);
await db.close();
log(`static copy: ${published.files} files at ${published.size} leaves in ${copy}`);
const tiles = tilesBetween(0, published.size);
const hashPaths = tiles.filter((tile) => tile.level !== 'entries').map((tile) => `tile/${tlogTilePath(tile)}`);
const bundlePaths = tiles.filter((tile) => tile.level === 'entries').map((tile) => `tile/${tlogTilePath(tile)}`);

const staticPort = await freePort();
const staticServer = startNode([...imageNodeFlags(), 'bench/baseline/staticFileServer.ts'], { ROOT: copy, PORT: String(staticPort) });
const staticBase = `http://127.0.0.1:${staticPort}`;
await waitForHttp(`${staticBase}/checkpoint`);
const auth = { authorization: `Bearer ${key}` };
// The api's own Postgres backends (the bench's connections are named `bench …`), for the CPU they spend serving.
const monitor = new pg.Client({ connectionString: DATABASE_URL, application_name: 'bench monitor' });
await monitor.connect();
const backends = async () =>
  (
    await monitor.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name NOT LIKE 'bench%'",
    )
  ).rows.map((row) => row.pid);
const staticServing = async () => [staticServer.pid!];

/**
 * Partial tiles of level 0 (width 255), as many as there are hash tiles: a partial tile is never kept in
 * memory, so reading these runs the code of a first read (the key, the limiter, the query, the tile's
 * composition) in the api without putting a single full tile in its cache. The static server is warm when
 * measured (it served the warm-up round, and every round before); this puts the api's code in the same
 * state, so that a first read measures the tiles not being in memory, as in a pod that has served for a
 * while, rather than V8 compiling the request path while it measures (firstReadByFreshProcess keeps that).
 */
const codeWarmingPaths = hashPaths.map(
  (_, position) => `tile/${tlogTilePath({ level: 0, index: (position * 7) % Math.floor(published.size / 256), width: 255 })}`,
);

/** The first read by an api process just started, whose code V8 compiles as it serves (the figure before 2026-12-05). */
async function firstReadByFreshProcess(): Promise<{ rate: number; bytes: number; cpu: number }> {
  const fresh = await startApiProcess(DATABASE_URL);
  try {
    return await readAll(`${fresh.baseUrl}/api/v2/public/audit/integrity`, hashPaths, auth, async () => [
      fresh.child.pid!,
      ...(await backends()),
    ]);
  } finally {
    await stopProcess(fresh.child);
  }
}

const results: Array<Record<string, number>> = [];
try {
  for (let round = 0; round <= ROUNDS; round += 1) {
    const staticHashes = await readAll(staticBase, hashPaths, {}, staticServing);
    const apiHashesFreshProcess = await firstReadByFreshProcess();
    const api = await startApiProcess(DATABASE_URL);
    const apiBase = `${api.baseUrl}/api/v2/public/audit/integrity`;
    const apiServing = async () => [api.child.pid!, ...(await backends())];
    try {
      await readAll(apiBase, codeWarmingPaths, auth, apiServing);
      const apiHashes = await readAll(apiBase, hashPaths, auth, apiServing);
      const apiHashesWarm = await readAll(apiBase, hashPaths, auth, apiServing);
      const staticBundles = await readAll(staticBase, bundlePaths, {}, staticServing);
      const apiBundles = await readAll(apiBase, bundlePaths, auth, apiServing);
      if (apiHashes.bytes !== staticHashes.bytes || apiBundles.bytes !== staticBundles.bytes)
        throw new Error('the API and the copy served different bytes');
      const figures = {
        staticHashes: staticHashes.rate,
        apiHashes: apiHashes.rate,
        apiHashesFreshProcess: apiHashesFreshProcess.rate,
        apiHashesWarm: apiHashesWarm.rate,
        staticBundles: staticBundles.rate,
        apiBundles: apiBundles.rate,
        cpuStaticHashes: staticHashes.cpu,
        cpuApiHashes: apiHashes.cpu,
        cpuApiHashesFreshProcess: apiHashesFreshProcess.cpu,
        cpuStaticBundles: staticBundles.cpu,
        cpuApiBundles: apiBundles.cpu,
      };
      log(
        `${round === 0 ? 'warm-up' : `round ${round}`}: ${JSON.stringify(Object.fromEntries(Object.entries(figures).map(([name, rate]) => [name, Math.round(rate)])))}`,
      );
      if (round > 0) results.push(figures);
    } finally {
      await stopProcess(api.child);
    }
  }

  // Entry bundles none of which is kept (as after a redaction or an expiry of the tenant): built, then kept.
  const unkept = await startApiProcess(DATABASE_URL);
  let rebuilt: { rate: number; bytes: number; cpu: number };
  let staticAgain: { rate: number; bytes: number; cpu: number };
  try {
    const admin = new pg.Client({ connectionString: DATABASE_URL });
    await admin.connect();
    await admin.query('DELETE FROM merkle_entry_bundles WHERE tenant_id = $1', [TENANT]);
    await admin.end();
    staticAgain = await readAll(staticBase, bundlePaths, {}, staticServing);
    rebuilt = await readAll(`${unkept.baseUrl}/api/v2/public/audit/integrity`, bundlePaths, auth, async () => [
      unkept.child.pid!,
      ...(await backends()),
    ]);
    if (rebuilt.bytes !== staticAgain.bytes) throw new Error('the API and the copy served different bytes');
    log(
      `bundles none of which is kept: ${JSON.stringify({ staticBundles: Math.round(staticAgain.rate), apiBundles: Math.round(rebuilt.rate) })}`,
    );
  } finally {
    await stopProcess(unkept.child);
  }

  // Proof of inclusion by tiles: the Go client's tile requests per level for random leaves, through a counting proxy.
  const counts = new Map<string, number>();
  const proxy = createServer(async (request, response) => {
    const path = request.url ?? '';
    const level = /\/tile\/(\d+|entries)\//.exec(path)?.[1];
    if (level !== undefined) counts.set(level, (counts.get(level) ?? 0) + 1);
    const upstream = await fetch(`${staticBase}${path}`);
    response.writeHead(upstream.status).end(Buffer.from(await upstream.arrayBuffer()));
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const proxyBase = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  const api = await startApiProcess(DATABASE_URL);
  const vkey = (await (await fetch(`${api.baseUrl}/api/v2/public/audit/integrity/verifier-key`, { headers: auth })).text()).trim();
  await stopProcess(api.child);
  const perLevel: Record<string, number> = {};
  for (let sample = 0; sample < 20; sample += 1) {
    counts.clear();
    const leaf = Math.floor(Math.random() * published.size);
    const proof = await runGoTlogClient({ prefix: proxyBase, apiKey: 'none', vkey, leaves: [leaf] });
    if (proof.status !== 0) throw new Error(`the Go client failed on leaf ${leaf}: ${proof.stderr}`);
    for (const [level, count] of counts) perLevel[level] = Math.max(perLevel[level] ?? 0, count);
  }
  await new Promise((resolve) => proxy.close(resolve));

  const ratio = (api: string, bare: string) => results.map((figures) => figures[api]! / figures[bare]!);
  const hashes = ratio('apiHashes', 'staticHashes');
  const freshProcess = ratio('apiHashesFreshProcess', 'staticHashes');
  const warm = ratio('apiHashesWarm', 'staticHashes');
  const bundles = ratio('apiBundles', 'staticBundles');
  console.log(
    [
      `tiles of a ${published.size}-leaf log, ${hashPaths.length} hash tiles and ${bundlePaths.length} entry bundles, ${IN_FLIGHT} requests in flight; ${ROUNDS} rounds after a warm-up`,
      `hash tiles, first read (none in memory, the api's code warm) vs the bare static server: ${fixed(median(hashes))} (${hashes.map(fixed).join(' ')}); ${Math.round(median(results.map((r) => r.apiHashes!)))} vs ${Math.round(median(results.map((r) => r.staticHashes!)))} tiles/s`,
      `hash tiles, first read by an api process just started: ${fixed(median(freshProcess))} (${freshProcess.map(fixed).join(' ')}); ${Math.round(median(results.map((r) => r.apiHashesFreshProcess!)))} tiles/s, ${Math.round(median(results.map((r) => r.cpuApiHashesFreshProcess!)))} µs CPU per tile`,
      `hash tiles, second read (warm): ${fixed(median(warm))} (${warm.map(fixed).join(' ')}); ${Math.round(median(results.map((r) => r.apiHashesWarm!)))} tiles/s`,
      `entry bundles (kept) vs the bare static server: ${fixed(median(bundles))} (${bundles.map(fixed).join(' ')}); ${Math.round(median(results.map((r) => r.apiBundles!)))} vs ${Math.round(median(results.map((r) => r.staticBundles!)))} bundles/s`,
      `entry bundles none of which is kept (built, then kept; once): ${fixed(rebuilt.rate / staticAgain.rate)}; ${Math.round(rebuilt.rate)} vs ${Math.round(staticAgain.rate)} bundles/s`,
      `CPU per request (static server; api process + its Postgres backends), median: hash tiles, first read ${Math.round(median(results.map((r) => r.cpuStaticHashes!)))} vs ${Math.round(median(results.map((r) => r.cpuApiHashes!)))} µs (static ÷ api ${fixed(median(ratio('cpuStaticHashes', 'cpuApiHashes')))}); kept bundles ${Math.round(median(results.map((r) => r.cpuStaticBundles!)))} vs ${Math.round(median(results.map((r) => r.cpuApiBundles!)))} µs (${fixed(median(ratio('cpuStaticBundles', 'cpuApiBundles')))}); bundles none kept ${Math.round(staticAgain.cpu)} vs ${Math.round(rebuilt.cpu)} µs`,
      `proof of inclusion (Go tlog client, 20 random leaves): most tile requests per level ${JSON.stringify(perLevel)}`,
    ].join('\n'),
  );
} finally {
  await monitor.end();
  await stopProcess(staticServer);
  rmSync(copy, { recursive: true, force: true });
}
