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
 * so that nothing but the long-read admission holds the exporter back (a tenant may hold many keys). It
 * runs twice, each time in a process of its own: with exports yielding to short requests (the default,
 * platform/longReadYield.ts) and without (LONG_READ_YIELD=0ms, the service as it was before), in the order
 * BENCH_ORDER gives (duty,yield,no-yield), so they are compared within one run: lister p99 ratios, and the
 * exports per second each lets through. `duty` adds the duty cycle (platform/longReadDutyCycle.ts) at
 * LONG_READ_DUTY_CYCLE 0.3, the default, to yielding; `duty-0.5` at 0.5, the earlier default (in BENCHMARKS.md
 * sections before "a duty cycle of 0.3", `duty` meant 0.5 and `duty-0.3` meant 0.3).
 *
 * Before the lister starts, each variant runs the exports alone for BENCH_ALONE_S (15) seconds: the duty
 * cycle must cost nothing when no short request is about, so exports per second alone are compared too.
 *
 * The exporter (bench/support/exportLoops.ts, a process of its own) runs BENCH_EXPORTERS loops (16), each
 * posting 10,000-event exports of the big tenant of the list dataset back to back and reading them whole as
 * fast as it can, waiting Retry-After after a 429 as the client package does. BENCH_PHASE_S (30) seconds
 * per phase: baseline, exports, baseline.
 *
 * With a read replica (issue 43): `BENCH_REPLICA=1 node bench/exportFairness.ts` puts the dataset on a private
 * primary of this run and makes a streaming replica of it (pg_basebackup -R, test/support/private-replica.ts);
 * the `replica` variant is `duty` with DATABASE_READ_URL on the replica and READ_REPLICA_READS=all, so exports
 * (without proofs) and the lister's pages read there; `replica-long` the same with READ_REPLICA_READS=long (the
 * default), so the exports read there and the pages on the primary. BENCH_ORDER defaults to
 * duty,replica,replica-long, and each variant also reports the CPU the primary's processes (the postmaster and
 * every backend) used while the exports ran. A variant may be named more than once, to interleave rounds.
 */
import { spawnSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { PrivateReplica } from '../test/support/private-replica.ts';
import { PrivatePostgres } from '../test/support/private-services.ts';
import { startApiProcess, type ApiProcess } from './support/apiProcess.ts';
import { mintBenchKeys } from './support/keys.ts';
import { type LoadResult, pacedLoad } from './support/load.ts';
import { cpuByPid, sampleRss, spawnReporting, stopProcess } from './support/processes.ts';

const WITH_REPLICA = process.env.BENCH_REPLICA === '1';
// The dataset's server is read when listDataset.ts loads: a private primary must be named before.
const primary = WITH_REPLICA ? await PrivatePostgres.start({ settings: { shared_buffers: '256MB' } }) : undefined;
if (primary) process.env.BENCH_POSTGRES_URL = primary.url;
const { BIG_TENANT, LIST_DATABASE_URL, ensureListDataset } = await import('./support/listDataset.ts');

const PHASE_S = Number(process.env.BENCH_PHASE_S ?? 30);
const EXPORTERS = Number(process.env.BENCH_EXPORTERS ?? 16);
const ALONE_S = Number(process.env.BENCH_ALONE_S ?? 15);
const ORDER = (process.env.BENCH_ORDER ?? (WITH_REPLICA ? 'duty,replica,replica-long' : 'duty,yield,no-yield')).split(',') as Variant[];
const LIST_RATE = 10;
const LISTER = 'tenant-0003';

/**
 * duty: yielding and a duty cycle of 0.3 (duty-0.5: of 0.5); yield: yielding alone (100 rows per FETCH);
 * no-yield: as the service was before (no yielding, 500 rows per FETCH); small-fetch: 100 rows per FETCH
 * without yielding, to tell the two changes' effects apart. Each names every setting, whatever the defaults.
 */
type Variant = 'duty' | 'duty-0.5' | 'yield' | 'no-yield' | 'small-fetch' | 'replica' | 'replica-long';
const VARIANT_ENV: Record<Variant, Record<string, string>> = {
  duty: { LONG_READ_DUTY_CYCLE: '0.3' },
  'duty-0.5': { LONG_READ_DUTY_CYCLE: '0.5' },
  yield: { LONG_READ_DUTY_CYCLE: '1' },
  'no-yield': { LONG_READ_YIELD: '0ms', LONG_READ_FETCH_ROWS: '500', LONG_READ_DUTY_CYCLE: '1' },
  'small-fetch': { LONG_READ_YIELD: '0ms', LONG_READ_DUTY_CYCLE: '1' },
  // And DATABASE_READ_URL, below.
  replica: { LONG_READ_DUTY_CYCLE: '0.3', READ_REPLICA_READS: 'all' },
  'replica-long': { LONG_READ_DUTY_CYCLE: '0.3', READ_REPLICA_READS: 'long' },
};

await ensureListDataset((line) => console.error(line));
const replica = primary ? await PrivateReplica.start(primary) : undefined;
if (replica) {
  const readUrl = `${replica.url}/${new URL(LIST_DATABASE_URL).pathname.slice(1)}`;
  VARIANT_ENV.replica.DATABASE_READ_URL = readUrl;
  VARIANT_ENV['replica-long'].DATABASE_READ_URL = readUrl;
}

/** The private primary's postmaster and every process under it (backends, WAL sender, checkpointer). */
function primaryProcesses(): number[] {
  const root = primary?.pid;
  if (root === undefined) return [];
  const children = spawnSync('pgrep', ['-P', String(root)], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter(Boolean)
    .map(Number);
  return [root, ...children];
}

/** CPU of the private primary from now until the returned function is called, in % of one core. */
function primaryCpu(): () => number | undefined {
  if (!primary) return () => undefined;
  const first = cpuByPid(primaryProcesses());
  const last = new Map(first);
  const timer = setInterval(() => {
    for (const [pid, cpu] of cpuByPid(primaryProcesses())) last.set(pid, cpu);
  }, 500);
  const started = performance.now();
  return () => {
    clearInterval(timer);
    for (const [pid, cpu] of cpuByPid(primaryProcesses())) last.set(pid, cpu);
    let used = 0;
    for (const [pid, cpu] of last) used += cpu - (first.get(pid) ?? 0);
    return Number(((100 * used) / ((performance.now() - started) / 1000)).toFixed(1));
  };
}
const exporterKeys = await mintBenchKeys(LIST_DATABASE_URL, [BIG_TENANT], ['audit:export']);
const listerKeys = await mintBenchKeys(LIST_DATABASE_URL, [LISTER], ['audit:read']);

const list = (api: ApiProcess, durationS = PHASE_S): Promise<LoadResult> =>
  pacedLoad({
    url: api.baseUrl,
    nextRequest: () => ({ path: '/api/v2/public/audit/events?limit=100', headers: { authorization: `Bearer ${listerKeys.get(LISTER)}` } }),
    connections: 8,
    durationS,
    rate: LIST_RATE,
  });

const summary = (result: LoadResult) => ({
  p50_ms: result.p50,
  p90_ms: result.p90,
  p99_ms: result.p99,
  requests: Object.values(result.statuses ?? {}).reduce((sum, count) => sum + count, 0),
  statuses: result.statuses,
  errors: result.errors,
});

/** The yield metrics of an api (platform/metrics.ts), read at the end of its exports phase. */
async function yieldMetrics(api: ApiProcess): Promise<Record<string, number>> {
  const text = await (await fetch(`${api.internalUrl}/metrics`)).text();
  const wanted = [
    'audit_long_read_yields_total',
    'audit_long_read_yield_seconds_total',
    'audit_long_read_yields_declined_total',
    'audit_long_read_duty_pauses_total',
    'audit_long_read_duty_pause_seconds_total',
  ];
  return Object.fromEntries(
    text
      .split('\n')
      .map((line) => line.split(' '))
      .filter(([name]) => wanted.includes(name!))
      .map(([name, value]) => [name!, Number(Number(value).toFixed(2))]),
  );
}

const startExporter = (api: ApiProcess) =>
  spawnReporting(['bench/support/exportLoops.ts'], {
    BENCH_EXPORT_URL: `${api.baseUrl}/api/v2/public/audit/export?format=ndjson`,
    BENCH_EXPORT_KEY: exporterKeys.get(BIG_TENANT)!,
    BENCH_EXPORTERS: String(EXPORTERS),
  });

/**
 * Exports per second with no short request about: after the lister's baseline, so counted only once its
 * window (LONG_READ_DUTY_WINDOW, 1 s) has passed.
 */
async function exportsAlone(api: ApiProcess): Promise<number> {
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  const exporter = startExporter(api);
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, ALONE_S * 1000));
  exporter.child.kill('SIGTERM');
  const tally = await exporter.firstLine;
  return Number((tally.completed / ((performance.now() - started) / 1000)).toFixed(2));
}

/** Baseline, exports alone, exports flat out beside the lister, baseline: one variant, in a process of its own. */
async function measure(variant: Variant) {
  const api = await startApiProcess(LIST_DATABASE_URL, { env: VARIANT_ENV[variant] });
  await list(api, 3); // warm-up: plans, connections, the key cache
  const before = await list(api);
  const alonePerSecond = ALONE_S > 0 ? await exportsAlone(api) : undefined;
  const rss = sampleRss(api.child.pid!);
  const exporter = startExporter(api);
  const started = performance.now();
  // Let the exports fill every slot they can take before the lister's clock starts.
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const loadAverage = loadavg()[0]!;
  const cpu = primaryCpu();
  const during = await list(api);
  const primaryCpuPercent = cpu();
  exporter.child.kill('SIGTERM');
  const tally = await exporter.firstLine;
  const exportSeconds = (performance.now() - started) / 1000;
  const yields = await yieldMetrics(api);
  const peakRssMb = rss.stop();
  const after = await list(api);
  await stopProcess(api.child);
  const baselineP99 = (before.p99 + after.p99) / 2;
  return {
    variant,
    lister_before: summary(before),
    lister_with_exports: summary(during),
    lister_after: summary(after),
    lister_p99_ratio_vs_baseline: Number((during.p99 / baselineP99).toFixed(2)),
    // With 300 requests a phase the p99 is the third slowest: on a shared machine the p50 and p90 ratios
    // say more about what the exports cost every request.
    lister_p50_ratio_vs_baseline: Number((during.p50 / ((before.p50 + after.p50) / 2)).toFixed(2)),
    lister_p90_ratio_vs_baseline: Number((during.p90! / ((before.p90! + after.p90!) / 2)).toFixed(2)),
    lister_503: during.statuses?.[503] ?? 0,
    exports: { ...tally, per_s: Number((tally.completed / exportSeconds).toFixed(2)), alone_per_s: alonePerSecond },
    yields,
    api_peak_rss_mb: Math.round(peakRssMb),
    primary_cpu_percent_with_exports: primaryCpuPercent,
    load_average_1m: Number(loadAverage.toFixed(2)),
  };
}

const results: Awaited<ReturnType<typeof measure>>[] = [];
try {
  for (const variant of ORDER) {
    results.push(await measure(variant));
    // Each round as it ends: a long interleaved run keeps what it measured if a later round fails.
    console.error(JSON.stringify(results.at(-1)));
  }
} finally {
  await replica?.remove();
  await primary?.remove();
}
const exportsOf = (variant: Variant) => results.find((result) => result.variant === variant)?.exports;
const ratio = (a: number | undefined, b: number | undefined) =>
  a !== undefined && b !== undefined && b > 0 ? Number((a / b).toFixed(2)) : undefined;
const p99Of = (variant: Variant) => results.find((result) => result.variant === variant)?.lister_p99_ratio_vs_baseline;
/** One figure of every round of each variant, in the order run (a variant named twice in BENCH_ORDER has two). */
const byVariant = (figure: (result: (typeof results)[number]) => number | undefined) => {
  const rounds: Record<string, (number | undefined)[]> = {};
  for (const result of results) {
    rounds[result.variant] ??= [];
    rounds[result.variant]!.push(figure(result));
  }
  return rounds;
};
console.log(
  JSON.stringify(
    {
      benchmark: 'export-fairness',
      command: 'node bench/exportFairness.ts',
      phase_s: PHASE_S,
      exporter_loops: EXPORTERS,
      lister_rate_per_s: LIST_RATE,
      results,
      lister_p99_ratios: byVariant((result) => result.lister_p99_ratio_vs_baseline),
      primary_cpu_percent_with_exports: byVariant((result) => result.primary_cpu_percent_with_exports),
      load_average_1m: byVariant((result) => result.load_average_1m),
      exports_per_s_yield_vs_no_yield: ratio(exportsOf('yield')?.per_s, exportsOf('no-yield')?.per_s),
      exports_per_s_duty_vs_yield: ratio(exportsOf('duty')?.per_s, exportsOf('yield')?.per_s),
      exports_alone_per_s_duty_vs_yield: ratio(exportsOf('duty')?.alone_per_s, exportsOf('yield')?.alone_per_s),
      lister_p99_ratio_duty_over_yield: ratio(p99Of('duty'), p99Of('yield')),
      lister_p99_ratio_replica_over_duty: ratio(p99Of('replica'), p99Of('duty')),
      lister_p99_ratio_replica_long_over_duty: ratio(p99Of('replica-long'), p99Of('duty')),
      primary_cpu_replica_vs_duty: ratio(
        results.find((result) => result.variant === 'replica')?.primary_cpu_percent_with_exports,
        results.find((result) => result.variant === 'duty')?.primary_cpu_percent_with_exports,
      ),
      goals: { lister_p99_ratio_vs_baseline: '<= 2 (duty); <= 1.3 (replica, replica-long)', lister_503: 0 },
    },
    null,
    2,
  ),
);
