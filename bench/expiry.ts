/**
 * Expiry benchmark (issue 31): one tenant's 1,000,000 expired events among 10 tenants expire in bounded
 * batches (RETENTION_BATCH_SIZE, the service's default unless set, one transaction each) while producers ingest
 * at half of ingest's peak, and the ingest p99 should stay within 2× of the same load without expiry.
 *
 *   node bench/expiry.ts            (node bench/run.ts expiry)
 *
 * The ingest role runs as the image runs it (the built CLI, `serve --roles ingest`); so does the expiry, one
 * `audit-trail retention run --tenant tenant-expired` process per expiring phase, as a CronJob runs it. The
 * expired tenant's events are seeded through the write path with ages spread evenly over 35–45 days; nine
 * other tenants hold BENCH_OTHERS (20,000) events each, kept (no policy).
 *
 * In the same run, before anything is timed: ingest's peak, BENCH_PEAK_PRODUCERS (8) producers posting the
 * paced phase's batches (BENCH_BATCH, 100 events, to the same endpoint) back to back for BENCH_PEAK_S (20)
 * seconds after a warm-up of the same length; then BENCH_WARMUP_S (15) seconds at the paced rate, discarded.
 * The paced rate is half that peak. Then phases alternate, each one's latencies kept apart: a baseline of
 * BENCH_PHASE_S (15) seconds without expiry, then a phase with expiry (as long as its pass lasts), once per
 * policy of BENCH_STEPS, and a last baseline. The policy shortens at each expiry phase (44d, 43d, … 36d, then
 * 30d: about 100,000 events each), so the million expires in ten passes of bounded batches. On this shared
 * machine one baseline alone moved 21× between two phases of one run (BENCHMARKS.md), and other sessions' load
 * comes and goes within minutes: short phases, alternated, put both sides under the same drift. Every phase is
 * printed with its number of samples and the rate it achieved; the verdict is the median of the paired ratios
 * (each expiry phase's p99 over the mean of the baselines either side of it), beside the medians and pooled p99s.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { loadavg } from 'node:os';
import { parseRetentionPeriod } from '../src/config/valueFormats.ts';
import { Database } from '../src/db/database.ts';
import { WEBHOOK_FAN_OUT } from '../src/delivery/fanOut.ts';
import { EventWriter } from '../src/events/eventWriter.ts';
import type { NewEvent } from '../src/events/eventStore.ts';
import { RetentionPolicies } from '../src/lifecycle/retentionPolicies.ts';
import { createLogger } from '../src/platform/logger.ts';
import { median } from '../test/support/statistics.ts';
import { ingestPeak, type IngestTarget, pacedIngest, type PhaseSamples } from './support/ingestLoad.ts';
import { SERVER_URL } from './support/listDataset.ts';
import {
  BENCH_INGEST_TOKEN,
  BENCH_PEPPER,
  builtCli,
  freePort,
  freshDatabase,
  percentile,
  startNode,
  stopProcess,
  waitForHttp,
} from './support/processes.ts';
import { removeNamespaceStreams } from '../test/support/natsNamespaces.ts';

const DATABASE_NAME = 'audit_bench_expiry';
const DATABASE_URL = `${SERVER_URL}/${DATABASE_NAME}`;
const EXPIRED = Number(process.env.BENCH_EXPIRED ?? 1_000_000);
const OTHERS = Number(process.env.BENCH_OTHERS ?? 20_000);
const BATCH = Number(process.env.BENCH_BATCH ?? 100);
const PEAK_PRODUCERS = Number(process.env.BENCH_PEAK_PRODUCERS ?? 8);
const PEAK_S = Number(process.env.BENCH_PEAK_S ?? 20);
const WARMUP_S = Number(process.env.BENCH_WARMUP_S ?? 15);
const PHASE_S = Number(process.env.BENCH_PHASE_S ?? 15);
/** The policy of each expiring phase: each expires the next slice of the ages 35–45 days. */
const STEPS = (process.env.BENCH_STEPS ?? '44d,43d,42d,41d,40d,39d,38d,37d,36d,30d').split(',');
const EXPIRED_TENANT = 'tenant-expired';
const DAY = 86_400_000;
const log = createLogger('warn');
const loadAtStart = loadavg();

await freshDatabase(SERVER_URL, DATABASE_NAME, log);
const db = new Database({ url: DATABASE_URL, poolSize: 4, applicationName: 'bench expiry', log });
const writer = new EventWriter(db, WEBHOOK_FAN_OUT);

function storedEvent(tenantId: string, occurredAtMs: number, index: number): NewEvent {
  return {
    tenantId,
    occurredAtMs,
    eventId: randomUUID(),
    action: index % 3 === 0 ? 'phi.read' : 'phi.query',
    userId: `user-${index % 500}`,
    userRole: 'clinician',
    resourceType: 'patient_record',
    resourceId: `p-${index}`,
    fieldsAccessed: '["diagnosis"]',
    phiInvolved: true,
    sourceIp: '10.1.2.3',
    userAgent: 'bench/1.0',
    justification: '',
    success: true,
    details: '{"ward":"3"}',
  };
}

/** The expired tenant's events aged 35–45 days, evenly; the others' over the last 10 days. */
async function seed(): Promise<void> {
  const started = performance.now();
  const oldest = Date.now() - 45 * DAY;
  for (let start = 0; start < EXPIRED; start += 1000) {
    const events = Array.from({ length: Math.min(1000, EXPIRED - start) }, (_, i) =>
      storedEvent(EXPIRED_TENANT, oldest + Math.floor(((start + i) / EXPIRED) * 10 * DAY), start + i),
    );
    await writer.write(events, 'bench');
  }
  for (let tenant = 1; tenant <= 9; tenant += 1) {
    for (let start = 0; start < OTHERS; start += 1000) {
      const events = Array.from({ length: 1000 }, (_, i) =>
        storedEvent(`tenant-${tenant}`, Date.now() - 10 * DAY + (start + i) * 1000, start + i),
      );
      await writer.write(events, 'bench');
    }
  }
  const seconds = (performance.now() - started) / 1000;
  console.log(
    `seeded ${EXPIRED} events of ${EXPIRED_TENANT} (35–45 days old) and ${9 * OTHERS} kept events of nine tenants in ${seconds.toFixed(0)} s`,
  );
}

/** One expiry pass of the expired tenant in its own process, as a CronJob runs it; resolves with its count. */
async function expiryPass(): Promise<{ expired: number; seconds: number }> {
  const started = performance.now();
  const child: ChildProcess = spawn(process.execPath, builtCli('retention', 'run', '--tenant', EXPIRED_TENANT, '--json'), {
    env: { ...process.env, DATABASE_URL, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const [code] = await once(child, 'exit');
  if (code !== 0) throw new Error(`retention run exited ${code}: ${output}`);
  const result = JSON.parse(output) as { tenants: Array<{ expired?: { count: number } }> };
  return { expired: result.tenants[0]?.expired?.count ?? 0, seconds: (performance.now() - started) / 1000 };
}

await seed();
const policies = new RetentionPolicies({ db, writer, defaultPeriod: undefined });
const operator = { userId: 'bench', userRole: 'operator' };
const declarePolicy = (period: string) =>
  policies.declare({ tenantId: EXPIRED_TENANT, period: parseRetentionPeriod(period)!, locked: false, archive: null }, 'bench', operator);

const internalPort = await freePort();
// The run's own JetStream names, removed from the machine's NATS when it ends.
const NAMESPACE = `bench${randomBytes(3).toString('hex')}`;
const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const ingest = startNode(builtCli('serve', '--roles', 'ingest'), {
  DATABASE_URL,
  INGEST_TOKENS: BENCH_INGEST_TOKEN,
  NATS_NAMESPACE: NAMESPACE,
  KEY_PEPPER: BENCH_PEPPER,
  HOST: '127.0.0.1',
  PORT: String(await freePort()),
  INTERNAL_PORT: String(internalPort),
  LOG_LEVEL: 'warn',
});
await waitForHttp(`http://127.0.0.1:${internalPort}/readyz`);
const target: IngestTarget = {
  url: `http://127.0.0.1:${internalPort}`,
  batch: BATCH,
  tenants: Array.from({ length: 9 }, (_, i) => `tenant-${i + 1}`),
};

await ingestPeak(target, PEAK_PRODUCERS, PEAK_S);
const peak = await ingestPeak(target, PEAK_PRODUCERS, PEAK_S);
const rate = peak / 2 / BATCH;
console.log(
  `ingest peak ${peak.toFixed(0)} events/s (${PEAK_PRODUCERS} producers, batches of ${BATCH}); paced at half: ${(rate * BATCH).toFixed(0)} events/s`,
);
const seconds = (s: number) => new Promise((resolve) => setTimeout(resolve, s * 1000));
await pacedIngest(target, rate, seconds(WARMUP_S));

interface Phase {
  readonly name: string;
  readonly samples: PhaseSamples;
  readonly expiry?: { expired: number; seconds: number };
}
const phases: Phase[] = [];
for (const [step, period] of STEPS.entries()) {
  phases.push({ name: `baseline ${step + 1}`, samples: await pacedIngest(target, rate, seconds(PHASE_S)) });
  await declarePolicy(period);
  const pass = expiryPass();
  const samples = await pacedIngest(target, rate, pass);
  phases.push({ name: `expiry ${step + 1} (${period})`, samples, expiry: await pass });
}
phases.push({ name: `baseline ${STEPS.length + 1}`, samples: await pacedIngest(target, rate, seconds(PHASE_S)) });
await stopProcess(ingest);
await removeNamespaceStreams(NATS_URL, NAMESPACE);
const left = Number(
  (await db.query(`SELECT count(*) AS n FROM events WHERE tenant_id = $1 AND action NOT LIKE '%.retention.%'`, [EXPIRED_TENANT])).rows[0]!
    .n,
);
await db.close();
report(phases, left);

function report(all: readonly Phase[], remaining: number): void {
  const p99 = (phase: Phase) => percentile(phase.samples.latencies, 99);
  console.log(`\ningest paced at ${(rate * BATCH).toFixed(0)} events/s (half of ${peak.toFixed(0)}), batches of ${BATCH}\n`);
  console.log('| phase | batches (samples) | achieved events/s | p50 | p99 | failed | expired |\n|---|---|---|---|---|---|---|');
  for (const phase of all) {
    const { latencies, failed, seconds: s } = phase.samples;
    const expired = phase.expiry
      ? `${phase.expiry.expired} in ${phase.expiry.seconds.toFixed(1)} s (${(phase.expiry.expired / phase.expiry.seconds).toFixed(0)}/s)`
      : '—';
    console.log(
      `| ${phase.name} | ${latencies.length} | ${((latencies.length * BATCH) / s).toFixed(0)} | ${percentile(latencies, 50).toFixed(1)} ms | ${p99(phase).toFixed(1)} ms | ${failed} | ${expired} |`,
    );
  }
  const baselines = all.filter((phase) => !phase.expiry);
  const withExpiry = all.filter((phase) => phase.expiry);
  const pooled = (of: readonly Phase[]) =>
    percentile(
      [...of.flatMap((phase) => phase.samples.latencies)].sort((a, b) => a - b),
      99,
    );
  const medianBaseline = median(baselines.map(p99));
  const medianWith = median(withExpiry.map(p99));
  const expired = withExpiry.reduce((sum, phase) => sum + phase.expiry!.expired, 0);
  const expirySeconds = withExpiry.reduce((sum, phase) => sum + phase.expiry!.seconds, 0);
  console.log(
    `\nexpired ${expired} events in ${expirySeconds.toFixed(1)} s of passes (${(expired / expirySeconds).toFixed(0)}/s), ${remaining} left`,
  );
  console.log(`baseline p99s ${baselines.map((phase) => p99(phase).toFixed(1)).join(', ')} ms: median ${medianBaseline.toFixed(1)} ms`);
  console.log(`expiry p99s ${withExpiry.map((phase) => p99(phase).toFixed(1)).join(', ')} ms: median ${medianWith.toFixed(1)} ms`);
  // Phases alternate baseline, expiry, baseline…: expiry phase i sits between baselines i and i + 1.
  const paired = withExpiry.map((phase, i) => p99(phase) / ((p99(baselines[i]!) + p99(baselines[i + 1]!)) / 2));
  console.log(`paired ratios (expiry p99 ÷ mean of the baselines either side): ${paired.map((ratio) => ratio.toFixed(2)).join(', ')}`);
  console.log(`p99 with expiry ÷ baseline, median of the paired ratios: ${median(paired).toFixed(2)} (goal ≤ 2)`);
  console.log(`p99 with expiry ÷ baseline, medians of phases: ${(medianWith / medianBaseline).toFixed(2)}`);
  console.log(
    `p99 with expiry ÷ baseline, pooled samples: ${(pooled(withExpiry) / pooled(baselines)).toFixed(2)} (${pooled(withExpiry).toFixed(1)} ms of ${withExpiry.reduce((n, phase) => n + phase.samples.latencies.length, 0)} ÷ ${pooled(baselines).toFixed(1)} ms of ${baselines.reduce((n, phase) => n + phase.samples.latencies.length, 0)})`,
  );
  // A phase whose answers came slower than they were sent was not at half the peak any more: say so.
  const behind = all.filter((phase) => phase.samples.latencies.length / phase.samples.seconds < 0.95 * rate).map((phase) => phase.name);
  if (behind.length > 0) console.log(`ingest fell behind the paced rate (answers < 95 % of it) in: ${behind.join(', ')}`);
  const fmt = (load: number[]) => load.map((value) => value.toFixed(1)).join(' ');
  console.log(`load average at start ${fmt(loadAtStart)}, at end ${fmt(loadavg())}`);
}
