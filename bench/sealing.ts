/**
 * Sealing benchmark (issue 18): the cost of tamper evidence on ingestion, in one run, for HTTP batches
 * (500 events, 4 producers) and JetStream (a drain of messages published beforehand), each in three modes
 * that alternate round by round:
 *   - before:  the seal-queue trigger disabled and no sealer: ingestion as it was before sealing existed;
 *   - queued:  the trigger on (every stored batch queues its events), no sealer process;
 *   - sealing: the trigger on and a sealer process (`serve --roles sealer`) running beside the ingest role.
 * The goal is sealing ≥ 0.9 × queued (medians over the rounds); before shows what the queue itself costs. During sealing phases the
 * age of the oldest unsealed event is sampled every 200 ms until the sealer has caught up: it must stay
 * under 3 × SEAL_INTERVAL. SEAL_INTERVAL is 1 s here (BENCH_SEAL_INTERVAL), ten times shorter than the
 * default, so that the sealer works while ingestion runs rather than after it. Each sealing phase's sealer
 * process has sealed BENCH_SEALER_WARMUP (20,000) events of another tenant before the phase starts, as a
 * sealer that has been running has (startWarmSealer).
 *
 * On a shared machine the rates move with whatever else runs (the same mode's rounds spread by up to 2.4×
 * in one run), so each phase also counts the CPU it cost per event: the ingest process, the sealer process
 * (until it has sealed the phase's events), their Postgres backends and this driver, from the phase's first
 * timed moment. Their ratio, queued over sealing, is the rate ratio a machine whose cores ingestion fills
 * would show, and it moves much less with other load. (Postgres' shared background processes, the WAL
 * writer and the checkpointer, and nats-server are left out: other sessions use them too.)
 *
 *   node bench/sealing.ts
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { BusNames, ensureConsumer, ingestConsumerDefinition } from '../src/bus/jetStreamDefinitions.ts';
import { parseDuration } from '../src/config/valueFormats.ts';
import { readDeploymentId } from '../src/db/deploymentIdentity.ts';
import { createDatabaseIfMissing, migrate } from '../src/db/migrate.ts';
import { createLogger } from '../src/platform/logger.ts';
import { SERVER_URL } from './support/listDataset.ts';
import { producerEvent } from './support/producers.ts';
import { BENCH_INGEST_TOKEN, builtCli, cpuByPid, freePort, startNode, stopProcess, waitForHttp } from './support/processes.ts';
import { removeNamespaceStreams } from '../test/support/natsNamespaces.ts';
import { median } from '../test/support/statistics.ts';

const DATABASE_URL = `${SERVER_URL}/audit_bench_sealing`;
const EVENTS = Number(process.env.BENCH_SEAL_EVENTS ?? 100_000);
const ROUNDS = Number(process.env.BENCH_SEAL_ROUNDS ?? 3);
const SEAL_INTERVAL = process.env.BENCH_SEAL_INTERVAL ?? '1s';
const SEALER_WARMUP = Number(process.env.BENCH_SEALER_WARMUP ?? 20_000);
const BATCH = 500;
const PRODUCERS = 4;
const MODES = ['before', 'queued', 'sealing'] as const;
type Mode = (typeof MODES)[number];

const admin = new pg.Client({ connectionString: `${SERVER_URL}/postgres` });
await admin.connect();
await admin.query('DROP DATABASE IF EXISTS audit_bench_sealing WITH (FORCE)');
await admin.end();
await createDatabaseIfMissing(DATABASE_URL);
await migrate(DATABASE_URL, createLogger('warn'));
const db = new pg.Client({ connectionString: DATABASE_URL });
await db.connect();
const signingKey = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const sealEnv = { DATABASE_URL, SEAL_SIGNING_KEY: signingKey, SEAL_INTERVAL, HOST: '127.0.0.1', LOG_LEVEL: 'warn' };

const queued = async () => Number((await db.query('SELECT coalesce(sum(event_count), 0) AS n FROM seal_queue')).rows[0].n);
/** The benchmark database's backends but this driver's: the ingest and sealer processes' connections. */
const backendPids = async () =>
  (await db.query(`SELECT pid FROM pg_stat_activity WHERE datname = 'audit_bench_sealing' AND pid <> pg_backend_pid()`)).rows.map((row) =>
    Number(row.pid),
  );

/**
 * CPU seconds from start() on of this driver, the given processes and the benchmark database's backends.
 * Each process counts from its reading at start(), or from zero if it started later (a JetStream phase's
 * ingest process connects within the phase), up to its last reading: sample() before a process is
 * stopped keeps what it used.
 */
function phaseCpu(processes: () => Array<number | undefined>) {
  const first = new Map<number, number>();
  const last = new Map<number, number>();
  let driver: NodeJS.CpuUsage | undefined;
  let driverS = 0;
  const pids = async () => [...processes().filter((pid): pid is number => pid !== undefined), ...(await backendPids())];
  const meter = {
    async start() {
      for (const [pid, seconds] of cpuByPid(await pids())) first.set(pid, seconds);
      driver = process.cpuUsage();
    },
    async sample() {
      for (const [pid, seconds] of cpuByPid(await pids())) last.set(pid, seconds);
      const own = process.cpuUsage(driver);
      driverS = (own.user + own.system) / 1e6;
    },
    /** The total, and the part of each process given (the rest is Postgres and this driver). */
    async seconds(): Promise<{ total: number; byProcess: number[] }> {
      await meter.sample();
      let total = driverS;
      for (const [pid, now] of last) total += now - (first.get(pid) ?? 0);
      const byProcess = processes().map((pid) => (pid === undefined ? 0 : (last.get(pid) ?? 0) - (first.get(pid) ?? 0)));
      return { total, byProcess };
    },
  };
  return meter;
}

const oldestUnsealedS = async () =>
  Number(
    (await db.query('SELECT coalesce(extract(epoch FROM clock_timestamp() - min(enqueued_at)), 0)::float8 AS age FROM seal_queue')).rows[0]
      .age,
  );

async function startSealer() {
  const port = await freePort();
  const sealer = startNode(builtCli('serve', '--roles', 'sealer'), { ...sealEnv, INTERNAL_PORT: String(port) });
  await waitForHttp(`http://127.0.0.1:${port}/readyz`);
  return sealer;
}

/** Seals whatever earlier phases left queued, so that every phase starts from an empty queue. */
async function drainQueue(): Promise<void> {
  if ((await queued()) === 0) return;
  const sealer = await startSealer();
  while ((await queued()) > 0) await new Promise((resolve) => setTimeout(resolve, 200));
  await stopProcess(sealer);
}

let warmups = 0;

/**
 * The sealer of a sealing phase, warmed up first by sealing SEALER_WARMUP events: a sealer runs for as
 * long as the service does, and a fresh process spends its first 20,000 events compiling its code (about
 * 10 µs of CPU per event against 3–4 once warm, measured; 0.15–0.2 s of CPU that a phase of 100,000
 * events would otherwise charge to sealing). The ingest process is warmed up once for the same reason.
 */
async function startWarmSealer() {
  const sealer = await startSealer();
  warmups += 1;
  await httpPhase(`sealer-warmup-${warmups}`, SEALER_WARMUP);
  while ((await queued()) > 0) await new Promise((resolve) => setTimeout(resolve, 100));
  return sealer;
}

async function setMode(mode: Mode) {
  await drainQueue();
  await db.query(`ALTER TABLE events ${mode === 'before' ? 'DISABLE' : 'ENABLE'} TRIGGER events_enqueue_for_sealing`);
  return mode === 'sealing' ? startWarmSealer() : undefined;
}

/** Samples the oldest unsealed event's age until stopped, then until the queue is empty. */
function watchBacklog() {
  let worst = 0;
  let running = true;
  const sampling = (async () => {
    while (running || (await queued()) > 0) {
      worst = Math.max(worst, await oldestUnsealedS());
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  })();
  return {
    async stop() {
      running = false;
      await sampling;
      return worst;
    },
  };
}

// HTTP: one ingest process for every phase, warmed up first.
const internalPort = await freePort();
// The run's own JetStream names, removed from the machine's NATS when it ends.
const NAMESPACE = `bench${randomBytes(3).toString('hex')}`;
const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const ingest = startNode(builtCli('serve', '--roles', 'ingest'), {
  DATABASE_URL,
  INGEST_TOKENS: BENCH_INGEST_TOKEN,
  NATS_NAMESPACE: NAMESPACE,
  HOST: '127.0.0.1',
  INTERNAL_PORT: String(internalPort),
  LOG_LEVEL: 'warn',
});
await waitForHttp(`http://127.0.0.1:${internalPort}/readyz`);

async function httpPhase(tenant: string, events: number, onStart: () => Promise<void> = async () => {}): Promise<number> {
  const batches = Array.from({ length: events / BATCH }, (_, batch) =>
    JSON.stringify({ events: Array.from({ length: BATCH }, (_, i) => producerEvent(tenant, batch * BATCH + i)) }),
  );
  let next = 0;
  await onStart();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: PRODUCERS }, async () => {
      while (next < batches.length) {
        const response = await fetch(`http://127.0.0.1:${internalPort}/internal/v1/events`, {
          method: 'POST',
          headers: { authorization: `Bearer ${BENCH_INGEST_TOKEN}`, 'content-type': 'application/json' },
          body: batches[next++]!,
        });
        if (!response.ok) throw new Error(`ingest answered ${response.status}: ${await response.text()}`);
        await response.arrayBuffer();
      }
    }),
  );
  return events / ((performance.now() - started) / 1000);
}

async function jetstreamPhase(
  tenant: string,
  onStart: (consumerPid: number) => Promise<void>,
  onEnd: () => Promise<void>,
): Promise<number> {
  const namespace = `bench${randomBytes(3).toString('hex')}`;
  const nc = await connect({ servers: NATS_URL });
  const names = new BusNames({ namespace, deploymentId: await readDeploymentId(db) });
  const jsm = await jetstreamManager(nc);
  const definition = ingestConsumerDefinition(names);
  await ensureConsumer(jsm, definition);
  const js = jetstream(nc);
  const subject = names.ingestSubject(tenant);
  for (let start = 0; start < EVENTS; start += 1000) {
    await Promise.all(
      Array.from({ length: Math.min(1000, EVENTS - start) }, (_, i) =>
        js.publish(subject, JSON.stringify(producerEvent(tenant, start + i))),
      ),
    );
  }
  const consumer = startNode(builtCli('serve', '--roles', 'ingest'), {
    DATABASE_URL,
    INGEST_TOKENS: BENCH_INGEST_TOKEN,
    NATS_NAMESPACE: namespace,
    HOST: '127.0.0.1',
    INTERNAL_PORT: String(await freePort()),
    LOG_LEVEL: 'warn',
  });
  const stored = async () =>
    (await db.query('SELECT EXISTS (SELECT 1 FROM events WHERE tenant_id = $1) AS found', [tenant])).rows[0].found as boolean;
  while (!(await stored())) await new Promise((resolve) => setTimeout(resolve, 20));
  await onStart(consumer.pid!);
  const started = performance.now();
  for (;;) {
    const info = await jsm.consumers.info(definition.stream.name, definition.consumer.durable_name);
    if (info.num_pending === 0 && info.num_ack_pending === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const rate = EVENTS / ((performance.now() - started) / 1000);
  await onEnd();
  await stopProcess(consumer);
  await nc.close();
  await removeNamespaceStreams(NATS_URL, namespace);
  return rate;
}

await httpPhase('warmup', 20_000);
const rates: Record<'http' | 'jetstream', Record<Mode, number[]>> = {
  http: { before: [], queued: [], sealing: [] },
  jetstream: { before: [], queued: [], sealing: [] },
};
const cpuUsPerEvent: Record<'http' | 'jetstream', Record<Mode, number[]>> = {
  http: { before: [], queued: [], sealing: [] },
  jetstream: { before: [], queued: [], sealing: [] },
};
const worstBacklogS: number[] = [];
for (let round = 0; round < ROUNDS; round += 1) {
  for (const input of ['http', 'jetstream'] as const) {
    // The order rotates round by round, so that no mode always runs first (or last) on a machine whose
    // speed drifts.
    for (const mode of [...MODES.slice(round % MODES.length), ...MODES.slice(0, round % MODES.length)]) {
      const sealer = await setMode(mode);
      const backlog = mode === 'sealing' ? watchBacklog() : undefined;
      const tenant = `${input}-${mode}-${round}`;
      let consumerPid: number | undefined;
      const cpu = phaseCpu(() => [input === 'http' ? ingest.pid : consumerPid, sealer?.pid]);
      const rate =
        input === 'http'
          ? await httpPhase(tenant, EVENTS, () => cpu.start())
          : await jetstreamPhase(
              tenant,
              async (pid) => {
                consumerPid = pid;
                await cpu.start();
              },
              () => cpu.sample(),
            );
      rates[input][mode].push(Math.round(rate));
      // The sealer's share includes sealing what the phase left queued.
      if (backlog) worstBacklogS.push(Number((await backlog.stop()).toFixed(2)));
      const { total, byProcess } = await cpu.seconds();
      const perEvent = (seconds: number) => ((seconds * 1e6) / EVENTS).toFixed(1);
      cpuUsPerEvent[input][mode].push(Number(perEvent(total)));
      if (sealer) await stopProcess(sealer);
      console.error(
        `round ${round + 1}, ${input}, ${mode}: ${Math.round(rate)} events/s; CPU µs per event ${perEvent(total)} ` +
          `(ingest process ${perEvent(byProcess[0]!)}, sealer process ${perEvent(byProcess[1]!)}, Postgres and driver ${perEvent(total - byProcess[0]! - byProcess[1]!)})`,
      );
    }
  }
}
await stopProcess(ingest);
await removeNamespaceStreams(NATS_URL, NAMESPACE);
await db.query('ALTER TABLE events ENABLE TRIGGER events_enqueue_for_sealing');
await db.end();

const ratio = (a: number[], b: number[]) => Number((median(a) / median(b)).toFixed(2));
const intervalS = parseDuration(SEAL_INTERVAL)! / 1000;
console.log(
  JSON.stringify(
    {
      benchmark: 'sealing',
      command: 'node bench/sealing.ts',
      events_per_phase: EVENTS,
      rounds: ROUNDS,
      seal_interval: SEAL_INTERVAL,
      http: {
        events_per_s: rates.http,
        sealing_vs_queued: ratio(rates.http.sealing, rates.http.queued),
        queued_vs_before: ratio(rates.http.queued, rates.http.before),
        sealing_vs_before: ratio(rates.http.sealing, rates.http.before),
        cpu_us_per_event: cpuUsPerEvent.http,
        cpu_queued_over_sealing: ratio(cpuUsPerEvent.http.queued, cpuUsPerEvent.http.sealing),
        cpu_before_over_queued: ratio(cpuUsPerEvent.http.before, cpuUsPerEvent.http.queued),
      },
      jetstream: {
        events_per_s: rates.jetstream,
        sealing_vs_queued: ratio(rates.jetstream.sealing, rates.jetstream.queued),
        queued_vs_before: ratio(rates.jetstream.queued, rates.jetstream.before),
        sealing_vs_before: ratio(rates.jetstream.sealing, rates.jetstream.before),
        cpu_us_per_event: cpuUsPerEvent.jetstream,
        cpu_queued_over_sealing: ratio(cpuUsPerEvent.jetstream.queued, cpuUsPerEvent.jetstream.sealing),
        cpu_before_over_queued: ratio(cpuUsPerEvent.jetstream.before, cpuUsPerEvent.jetstream.queued),
      },
      oldest_unsealed_s: {
        worst_per_sealing_phase: worstBacklogS,
        in_intervals: Number((Math.max(...worstBacklogS) / intervalS).toFixed(2)),
      },
      goals: { sealing_vs_queued: '>= 0.90', oldest_unsealed_in_intervals: '< 3' },
    },
    null,
    2,
  ),
);
