/**
 * The sealer's CPU per event, apart from ingestion: queue EVENTS events through the write path (batches of
 * 500, as the HTTP benchmark's), then seal them with an in-process sealer on one connection and count the
 * CPU time the sealer's Node process and its Postgres backend spent (process.cpuUsage and /proc/PID/stat
 * of the backend). On a shared 2-core machine the ingest ratios of bench/sealing.ts move with whatever else
 * runs; CPU time per event moves much less (about ±15 % between runs under a load of 6–10), so it is the
 * figure to compare changes of the sealer by. BENCH_SEAL_PROFILE=FILE.cpuprofile writes a CPU profile of
 * the sealing alone (without the queueing) per round. The queueing is measured too (`write_*`): the write
 * path's CPU per event, Node (EventWriter.write of parsed batches) and the writer's Postgres backends (the
 * insert, its fan-out and the seal-queue trigger), so that work moved from the sealer into the write path
 * shows on both sides.
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
import { median } from '../test/support/statistics.ts';
import { WEBHOOK_FAN_OUT } from '../src/delivery/fanOut.ts';

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
const writer = new EventWriter(
  new Database({ url: DATABASE_URL, poolSize: 4, applicationName: 'bench seal cost writer', log }),
  WEBHOOK_FAN_OUT,
);
const sealer = new Sealer({
  db,
  signer: new TreeHeadSigner(generateKeyPairSync('ed25519').privateKey),
  intervalMs: 1_000,
  heartbeatMs: 3_600_000,
  log,
});
await sealer.registerKey();
const backendPid = Number((await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
const window = { maxAgeMs: Number.POSITIVE_INFINITY, maxFutureSkewMs: 60_000 };

/** CPU seconds of a process so far (utime + stime), from /proc; 100 ticks a second on Linux. */
function processCpuS(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** The writer pool's backends, all four connected by a warm-up write. */
async function writerBackends(): Promise<number[]> {
  await Promise.all(
    Array.from({ length: 4 }, (_, producer) => writer.write(parseEventBatch([producerEvent('warmup', producer)], window), 'bench')),
  );
  const { rows } = await db.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE application_name = 'bench seal cost writer'`);
  return rows.map((row) => row.pid);
}
const writerPids = await writerBackends();
await sealer.sealPass();

const round2 = (value: number) => Number(value.toFixed(2));
const results: Array<{
  node_us: number;
  postgres_us: number;
  total_us: number;
  wall_s: number;
  write_node_us: number;
  write_postgres_us: number;
}> = [];
for (let round = 0; round < ROUNDS; round += 1) {
  const tenant = `cost-${round}`;
  const batches = Array.from({ length: Math.ceil(EVENTS / BATCH) }, (_, batch) =>
    parseEventBatch(
      Array.from({ length: Math.min(BATCH, EVENTS - batch * BATCH) }, (_, i) => producerEvent(tenant, batch * BATCH + i)),
      window,
    ),
  );
  const writeNode = process.cpuUsage();
  const writePostgres = writerPids.reduce((sum, pid) => sum + processCpuS(pid), 0);
  for (let start = 0; start < batches.length; start += 4) {
    await Promise.all(batches.slice(start, start + 4).map((batch) => writer.write(batch, 'bench')));
  }
  const writeNodeCpu = process.cpuUsage(writeNode);
  const writePostgresUs = ((writerPids.reduce((sum, pid) => sum + processCpuS(pid), 0) - writePostgres) * 1e6) / EVENTS;
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
  results.push({
    node_us: round2(nodeUs),
    postgres_us: round2(postgresUs),
    total_us: round2(nodeUs + postgresUs),
    wall_s: round2(wall),
    write_node_us: round2((writeNodeCpu.user + writeNodeCpu.system) / EVENTS),
    write_postgres_us: round2(writePostgresUs),
  });
  console.error(`round ${round + 1}: ${JSON.stringify(results.at(-1))}`);
}
await db.close();
console.log(
  JSON.stringify(
    {
      benchmark: 'seal-cost',
      command: 'node bench/sealCost.ts',
      events_per_round: EVENTS,
      rounds: results,
      median_cpu_us_per_event: {
        node: median(results.map((r) => r.node_us)),
        postgres: median(results.map((r) => r.postgres_us)),
        total: median(results.map((r) => r.total_us)),
      },
      median_write_cpu_us_per_event: {
        node: median(results.map((r) => r.write_node_us)),
        postgres: median(results.map((r) => r.write_postgres_us)),
      },
    },
    null,
    2,
  ),
);
process.exit(0);
