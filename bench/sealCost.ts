/**
 * The sealer's CPU per event, apart from ingestion: queue EVENTS events through the write path (batches of
 * 500, as the HTTP benchmark's), then seal them with an in-process sealer on one connection and count the
 * CPU time the sealer's Node process and its Postgres backend spent (process.cpuUsage and /proc/PID/stat
 * of the backend). On a shared 2-core machine the ingest ratios of bench/sealing.ts move with whatever else
 * runs; CPU time per event moves much less (about ±15 % between runs under a load of 6–10), so it is the
 * figure to compare changes of the sealer by. BENCH_SEAL_PROFILE=FILE.cpuprofile writes a CPU profile of
 * the sealing alone (without the queueing) per round.
 *
 *   node bench/sealCost.ts
 */
import { generateKeyPairSync } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import pg from 'pg';
import { Database } from '../src/db/database.ts';
import { createDatabaseIfMissing, migrate } from '../src/db/migrate.ts';
import { EventWriter } from '../src/events/eventWriter.ts';
import { parseEventBatch } from '../src/ingestion/eventInput.ts';
import { Sealer } from '../src/integrity/sealer.ts';
import { TreeHeadSigner } from '../src/integrity/treeHeadSigner.ts';
import { createLogger } from '../src/platform/logger.ts';
import { SERVER_URL } from './support/listDataset.ts';
import { producerEvent } from './support/producers.ts';

const DATABASE_URL = `${SERVER_URL}/audit_bench_seal_cost`;
const EVENTS = Number(process.env.BENCH_SEAL_EVENTS ?? 100_000);
const ROUNDS = Number(process.env.BENCH_SEAL_ROUNDS ?? 3);
const BATCH = 500;
const log = createLogger('warn');

const admin = new pg.Client({ connectionString: `${SERVER_URL}/postgres` });
await admin.connect();
await admin.query('DROP DATABASE IF EXISTS audit_bench_seal_cost WITH (FORCE)');
await admin.end();
await createDatabaseIfMissing(DATABASE_URL);
await migrate(DATABASE_URL, log);

const db = new Database({ url: DATABASE_URL, poolSize: 1, applicationName: 'bench seal cost', log });
const writer = new EventWriter(new Database({ url: DATABASE_URL, poolSize: 4, applicationName: 'bench seal cost writer', log }));
const sealer = new Sealer({ db, signer: new TreeHeadSigner(generateKeyPairSync('ed25519').privateKey), intervalMs: 1_000, heartbeatMs: 3_600_000, log });
await sealer.registerKey();
const backendPid = Number((await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
const window = { maxAgeMs: Number.POSITIVE_INFINITY, maxFutureSkewMs: 60_000 };

/** CPU seconds of a process so far (utime + stime), from /proc; 100 ticks a second on Linux. */
function processCpuS(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

const results: Array<{ node_us: number; postgres_us: number; total_us: number; wall_s: number }> = [];
for (let round = 0; round < ROUNDS; round += 1) {
  const tenant = `cost-${round}`;
  for (let start = 0; start < EVENTS; start += BATCH * 4) {
    await Promise.all(Array.from({ length: 4 }, (_, producer) => {
      const first = start + producer * BATCH;
      if (first >= EVENTS) return undefined;
      const items = Array.from({ length: Math.min(BATCH, EVENTS - first) }, (_, i) => producerEvent(tenant, first + i));
      return writer.write(parseEventBatch(items, window), 'bench');
    }));
  }
  const profiler = process.env.BENCH_SEAL_PROFILE ? new Session() : undefined;
  if (profiler) {
    profiler.connect();
    await profiler.post('Profiler.enable');
    await profiler.post('Profiler.start');
  }
  const node = process.cpuUsage();
  const postgres = processCpuS(backendPid);
  const started = performance.now();
  let sealed = 0;
  while (sealed < EVENTS) sealed += (await sealer.sealPass()).sealed;
  const wall = (performance.now() - started) / 1000;
  if (profiler) {
    const { profile } = await profiler.post('Profiler.stop');
    writeFileSync(process.env.BENCH_SEAL_PROFILE!.replace('.cpuprofile', `-${round + 1}.cpuprofile`), JSON.stringify(profile));
    profiler.disconnect();
  }
  const nodeCpu = process.cpuUsage(node);
  const nodeUs = (nodeCpu.user + nodeCpu.system) / EVENTS;
  const postgresUs = ((processCpuS(backendPid) - postgres) * 1e6) / EVENTS;
  results.push({ node_us: Number(nodeUs.toFixed(2)), postgres_us: Number(postgresUs.toFixed(2)), total_us: Number((nodeUs + postgresUs).toFixed(2)), wall_s: Number(wall.toFixed(2)) });
  console.error(`round ${round + 1}: ${JSON.stringify(results.at(-1))}`);
}
await db.close();
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
console.log(JSON.stringify({
  benchmark: 'seal-cost',
  command: 'node bench/sealCost.ts',
  events_per_round: EVENTS,
  rounds: results,
  median_cpu_us_per_event: { node: median(results.map((r) => r.node_us)), postgres: median(results.map((r) => r.postgres_us)), total: median(results.map((r) => r.total_us)) },
}, null, 2));
process.exit(0);
