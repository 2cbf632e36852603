/**
 * `make bench`: runs every benchmark, or those named (`node bench/run.ts delivery`), each in its own
 * process so that one's leftovers (connections, timers, memory) cannot colour the next one's figures.
 * Each benchmark prints its own figures next to the baseline it measured in the same run.
 */
import { spawnSync } from 'node:child_process';

const BENCHMARKS: Record<string, string> = {
  ingest: 'bench/ingest.ts',
  'ingest-node-cpu': 'bench/ingestNodeCpu.ts',
  list: 'bench/list.ts',
  'actor-filters': 'bench/actorFilters.ts',
  'stored-form': 'bench/storedForm.ts',
  'write-cost': 'bench/writeCost.ts',
  export: 'bench/export.ts',
  'export-fairness': 'bench/exportFairness.ts',
  limiter: 'bench/limiter.ts',
  delivery: 'bench/delivery.ts',
  'fan-out-filters': 'bench/fanOutFilters.ts',
  'hung-endpoint': 'bench/hungEndpoint.ts',
  replay: 'bench/replay.ts',
  'relay-pass': 'bench/relayPass.ts',
  sealing: 'bench/sealing.ts',
  'seal-cost': 'bench/sealCost.ts',
  integrity: 'bench/integrity.ts',
  tiles: 'bench/tiles.ts',
  portal: 'bench/portal.ts',
  search: 'bench/search.ts',
  'make-run': 'bench/makeRun.ts',
  streams: 'bench/streams.ts',
  expiry: 'bench/expiry.ts',
  compaction: 'bench/compaction.ts',
  'auth-lookup-timing': 'bench/authLookupTiming.ts',
  idle: 'bench/idle.ts',
  failover: 'bench/failover.ts',
};

const wanted = process.argv.slice(2);
const unknown = wanted.filter((name) => !(name in BENCHMARKS));
if (unknown.length > 0) {
  console.error(`unknown benchmark(s): ${unknown.join(', ')}; known: ${Object.keys(BENCHMARKS).join(', ')}`);
  process.exit(2);
}

let failed = 0;
for (const name of wanted.length > 0 ? wanted : Object.keys(BENCHMARKS)) {
  console.log(`\n=== ${name}: node ${BENCHMARKS[name]}`);
  const result = spawnSync(process.execPath, [BENCHMARKS[name]!], { stdio: 'inherit' });
  if (result.status !== 0) {
    failed += 1;
    console.error(`${name} failed (exit ${result.status ?? result.signal})`);
  }
}
process.exit(failed === 0 ? 0 : 1);
