/**
 * Webhook delivery benchmark (issue 4): deliveries/s from ingest to a local receiver answering 204 with one
 * worker process, against a bare undici sender posting the same kind of signed bodies, with a delivery's
 * headers, in the same run; commit-to-receipt latency at half the peak rate; and the same with 20 % of
 * endpoints failing or hanging.
 *
 *   node bench/delivery.ts            (make bench runs it too)
 *
 * Processes: this driver writes events through the service's own write path (EventWriter, so fan-out is
 * included): for the path's rounds as a writer without a publisher (the relay publishes), for the end-to-end
 * and paced phases as an ingest pod does (it publishes the deliveries of its writes; BENCH_PUBLISH_ON_WRITE=0
 * leaves them to the relay). The relay, the worker and the receiver each run in a process of their own.
 * Both sides are measured warm (bench/support/warmDelivery.ts): the bare sender sends BENCH_DELIVERY_WARMUP
 * requests (20,000) before its timed ones, and the worker delivers as many events before the path is
 * measured. Perf profiles
 * of the path's worker: TurboFan compiling took 16 % of its CPU after 10,000 and 6 % after 20,000. The path
 * is measured in BENCH_PATH_ROUNDS rounds (3), each between two runs of the bare sender, and its ratio is the
 * median of the rounds' (bench/support/pathRounds.ts). The path's rounds drain the outbox through the relay;
 * as many rounds `published_on_write` drain deliveries ingest published as it wrote their events, the way
 * the default roles deliver.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Database } from '../src/db/database.ts';
import type { NewEvent } from '../src/events/eventStore.ts';
import { connectBus } from '../src/bus/natsConnection.ts';
import { BusNames } from '../src/bus/jetStreamDefinitions.ts';
import { readDeploymentId } from '../src/db/deploymentIdentity.ts';
import { DeliveryPublisher } from '../src/delivery/deliveryPublisher.ts';
import { EventWriter } from '../src/events/eventWriter.ts';
import { ServiceMetrics } from '../src/platform/metrics.ts';
import { createLogger } from '../src/platform/logger.ts';
import { removeNamespaceStreams } from '../test/support/natsNamespaces.ts';
import { newEvent } from '../test/support/newEvents.ts';
import { SecretBox } from '../src/webhooks/secretBox.ts';
import { WebhookRegistry } from '../src/webhooks/webhookRegistry.ts';
import { measurePathRounds } from './support/pathRounds.ts';
import { startWarmDelivery } from './support/warmDelivery.ts';
import { statementPhase, type StatementTime } from './support/statementTimes.ts';
import {
  builtCli,
  cpuMeter,
  processCpuMeter,
  freshDatabase,
  percentile,
  backendsOf,
  pidsOfName,
  spawnReporting,
  waitReady,
  type ReportingChild,
} from './support/processes.ts';
import { WEBHOOK_FAN_OUT } from '../src/delivery/fanOut.ts';
import { ENDPOINT_DELIVERIES } from '../src/delivery/endpointDeliveries.ts';

const SERVER = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432';
const DATABASE_URL = `${SERVER}/audit_bench_delivery`;
const ENCRYPTION_KEY = randomBytes(32).toString('hex');
const PEAK_EVENTS = Number(process.env.BENCH_DELIVERY_EVENTS ?? 50_000);
const WARMUP_EVENTS = Number(process.env.BENCH_DELIVERY_WARMUP ?? 20_000);
const PACED_SECONDS = Number(process.env.BENCH_DELIVERY_SECONDS ?? 10);
const PATH_ROUNDS = Number(process.env.BENCH_PATH_ROUNDS ?? 3);
const CONCURRENCY = 16;
// The application names of the relay's and the worker's Postgres sessions (pool, and LISTEN or lock sessions).
const RELAY_SESSIONS = ['audit-trail relay', 'audit-trail delivery-relay'];
const WORKER_SESSIONS = ['audit-trail worker', 'audit-trail delivery-worker'];
const log = createLogger('warn');
const children: ChildProcess[] = [];
const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
// The run's own JetStream names, removed from the machine's NATS when it ends.
const namespace = `bench${randomBytes(3).toString('hex')}`;

function node(args: string[], env: Record<string, string> = {}): ReportingChild {
  const reporting = spawnReporting(args, env);
  children.push(reporting.child);
  return reporting;
}

function event(tenantId: string): NewEvent {
  return newEvent({ tenantId, details: '{"reason":"bench"}' });
}

interface ReceiverStats {
  count: number;
  firstAt: number;
  lastAt: number;
  latencies: number[];
}

async function main(): Promise<void> {
  await freshDatabase(SERVER, 'audit_bench_delivery', log);
  const receiver = node(['bench/webhookReceiver.ts']);
  const { port: receiverPort } = await receiver.firstLine;
  const receiverUrl = `http://127.0.0.1:${receiverPort}`;
  const stats = async (latencies = false): Promise<ReceiverStats> =>
    (await fetch(`${receiverUrl}/stats${latencies ? '?latencies=1' : ''}`)).json() as Promise<ReceiverStats>;
  const reset = async () => void (await fetch(`${receiverUrl}/reset`));

  // Baseline: the bare sender, same receiver, same concurrency per endpoint as the worker. It runs before the
  // first round of the path, after each round (support/pathRounds.ts), and after the service's phases.
  // Its CPU per request too: the sender's own during its timed requests, the receiver's over the warm-up and
  // the timed requests (it does the same for each).
  const bareCpuSeconds = { sender: 0, receiver: 0, requests: 0, receiverRequests: 0 };
  const bareSender = async (): Promise<number> => {
    const receiverCpu = cpuMeter(() => [receiver.child.pid!]);
    const bare = node(['bench/bareSender.ts'], {
      TARGET_URL: `${receiverUrl}/ok`,
      COUNT: String(PEAK_EVENTS),
      WARMUP: String(WARMUP_EVENTS),
      CONCURRENCY: String(CONCURRENCY),
    });
    const result = (await bare.firstLine) as { sent: number; seconds: number; cpuSeconds: number };
    bareCpuSeconds.sender += result.cpuSeconds;
    bareCpuSeconds.requests += result.sent;
    bareCpuSeconds.receiver += receiverCpu.elapsed();
    bareCpuSeconds.receiverRequests += result.sent + WARMUP_EVENTS;
    await reset();
    return result.sent / result.seconds;
  };
  const bareFirst = await bareSender();

  const serviceEnv = {
    DATABASE_URL,
    NATS_NAMESPACE: namespace,
    SECRET_ENCRYPTION_KEY: ENCRYPTION_KEY,
    WEBHOOK_ALLOW_HTTP: 'true',
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    DELIVERY_ENDPOINT_CONCURRENCY: String(CONCURRENCY),
    // Retries of the failing endpoints happen within the run, so they load the worker too.
    DELIVERY_SCHEDULE: '1s,2s,4s,8s',
    HOST: '127.0.0.1',
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
  };
  // One worker process and a relay beside it; BENCH_DELIVERY_LAYOUT=combined runs both roles in one process,
  // as the chart's worker Deployment does (measured: no faster on two cores, 0.28 vs 0.30 of the baseline).
  const separate = process.env.BENCH_DELIVERY_LAYOUT !== 'combined';

  const db = new Database({ url: DATABASE_URL, poolSize: 8, applicationName: 'bench driver', log });
  const writer = new EventWriter(db, WEBHOOK_FAN_OUT);
  const registry = new WebhookRegistry({
    db,
    writer,
    deliveries: ENDPOINT_DELIVERIES,
    secrets: new SecretBox(ENCRYPTION_KEY),
    policy: { allowHttp: true, allowPrivateTargets: true },
  });
  const actor = { userId: 'bench', userRole: 'operator' };
  const tenants = Array.from({ length: 10 }, (_, index) => `bench-${index}`);
  for (const tenant of tenants) await registry.register(tenant, { url: `${receiverUrl}/ok`, event_filter: ['phi.'] }, actor);

  const waitForCount = async (count: number, timeoutMs = 120_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const current = await stats();
      if (current.count >= count) return current;
      if (Date.now() > deadline) throw new Error(`only ${current.count} of ${count} deliveries arrived`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };

  const fill = async (count: number, through = writer) => {
    for (let written = 0; written < count; written += 500) {
      await through.write(
        Array.from({ length: Math.min(500, count - written) }, () => event(tenants[0]!)),
        'bench',
      );
    }
  };
  const workerEnv = { NODE_OPTIONS: process.env.BENCH_WORKER_NODE_OPTIONS ?? '' };
  const relayEnv = { NODE_OPTIONS: process.env.BENCH_RELAY_NODE_OPTIONS ?? '' };
  let worker: ReportingChild;
  let relay: () => ReportingChild | undefined;
  let refill: (events: number) => Promise<void>;
  if (separate) {
    const warm = await startWarmDelivery(
      {
        spawn: node,
        env: serviceEnv,
        workerEnv,
        relayEnv,
        workerPort: 18092,
        relayPort: 18091,
        warmupEvents: WARMUP_EVENTS,
        fill,
        delivered: waitForCount,
        resetReceiver: reset,
      },
      PEAK_EVENTS,
    );
    ({ worker, relay, refill } = warm);
  } else {
    // One process holds both roles, so it cannot stay warm while the outbox fills: this layout runs cold,
    // in one round.
    await reset();
    await fill(PEAK_EVENTS);
    worker = node(builtCli('serve', '--roles', 'relay,worker'), { ...serviceEnv, ...workerEnv, INTERNAL_PORT: '18092' });
    relay = () => undefined;
    refill = () => Promise.reject(new Error('the combined layout measures one round'));
    await waitReady(18092);
  }
  // CPU per delivery of each part while the path drains: steadier than the rate on a shared machine, and
  // it says where a change went. Postgres counts the benchmark database's backends (other sessions' work on
  // the machine stays out; the WAL writer's share does too). Summed over the rounds.
  const deliveryMeters = () => ({
    worker: cpuMeter(() => [worker.child.pid!]),
    relay: cpuMeter(() => [relay()?.child.pid].filter((pid) => pid !== undefined)),
    postgres: cpuMeter(() => backendsOf(SERVER, 'audit_bench_delivery')),
    nats: cpuMeter(() => pidsOfName('nats-server')),
    receiver: cpuMeter(() => [receiver.child.pid!]),
  });
  const cpuSeconds = { worker: 0, relay: 0, postgres: 0, nats: 0, receiver: 0 };
  // BENCH_STATEMENTS=1 on a server with pg_stat_statements: each round's Postgres time by statement.
  const statements = statementPhase(DATABASE_URL);
  const roundStatements: StatementTime[][] = [];
  const rounds = await measurePathRounds(
    separate ? PATH_ROUNDS : 1,
    bareFirst,
    async (round) => {
      if (round > 0) await refill(PEAK_EVENTS);
      await statements.start();
      const meters = deliveryMeters();
      const drained = await waitForCount(PEAK_EVENTS);
      for (const [part, meter] of Object.entries(meters)) cpuSeconds[part as keyof typeof cpuSeconds] += meter.elapsed();
      const times = await statements.stop();
      if (times) roundStatements.push(times);
      return (PEAK_EVENTS - 1) / ((drained.lastAt - drained.firstAt) / 1000);
    },
    bareSender,
  );
  const pathDeliveries = PEAK_EVENTS * rounds.rounds.length;
  const pathCpuUs = Object.fromEntries(
    Object.entries(cpuSeconds).map(([part, seconds]) => [part, Math.round((seconds * 1e6) / pathDeliveries)]),
  );
  const pathCpuUsTotal = (Object.values(cpuSeconds).reduce((sum, seconds) => sum + seconds, 0) * 1e6) / pathDeliveries;

  // End to end: events for one endpoint written as fast as the write path takes them (batches of 500)
  // while the relay and the worker deliver them; all share the machine's two cores. From here on the events
  // are written as an ingest pod writes them, publishing their deliveries after each commit
  // (delivery/deliveryPublisher.ts); BENCH_PUBLISH_ON_WRITE=0 leaves them to the relay, as the path's fill
  // does and as ingest did before.
  const bus = await connectBus(NATS_URL, 'bench driver', log);
  const publisher =
    process.env.BENCH_PUBLISH_ON_WRITE === '0'
      ? undefined
      : new DeliveryPublisher({
          db,
          bus,
          names: new BusNames({ namespace, deploymentId: await readDeploymentId(db) }),
          log,
          metrics: new ServiceMetrics(),
        });
  const ingestWriter = new EventWriter(db, WEBHOOK_FAN_OUT, undefined, publisher);
  // Its CPU per event by part, as for the path; `writer` is this driver's own process (the write path's
  // Node side, and the benchmark's making of the events).
  await reset();
  const endToEndMeters = {
    writer: processCpuMeter(),
    ...deliveryMeters(),
    // The Postgres total split by whose sessions did the work: the write path (this driver's pool), the
    // relay's (its pool and its LISTEN session) and the worker's.
    postgres_of_writer: cpuMeter(() => backendsOf(SERVER, 'audit_bench_delivery', ['bench driver'])),
    postgres_of_relay: cpuMeter(() => backendsOf(SERVER, 'audit_bench_delivery', RELAY_SESSIONS)),
    postgres_of_worker: cpuMeter(() => backendsOf(SERVER, 'audit_bench_delivery', WORKER_SESSIONS)),
  };
  const peakStarted = Date.now();
  await fill(PEAK_EVENTS, ingestWriter);
  const writtenAt = Date.now();
  const peak = await waitForCount(PEAK_EVENTS);
  const endToEndCpuUs = Object.fromEntries(
    Object.entries(endToEndMeters).map(([part, meter]) => [part, Math.round((meter.elapsed() * 1e6) / PEAK_EVENTS)]),
  );
  const peakRate = PEAK_EVENTS / ((peak.lastAt - peakStarted) / 1000);
  const ingestRate = PEAK_EVENTS / ((writtenAt - peakStarted) / 1000);

  // The path as the default roles run it: ingest publishes each delivery as it writes the event, so no relay
  // claims it (the path's rounds above drain the outbox through the relay, the way of retries and of what
  // ingest could not publish). The worker is stopped (SIGSTOP) while the events are written and their
  // deliveries published, then let go to drain JetStream. Postgres counts the worker's and the relay's
  // sessions: the write path's work, its confirmations included, is ingest's.
  const onWriteCpuSeconds = { worker: 0, relay: 0, postgres: 0, nats: 0, receiver: 0 };
  const onWrite =
    separate && publisher
      ? await measurePathRounds(
          PATH_ROUNDS,
          rounds.bareRuns.at(-1)!,
          async () => {
            const pid = worker.child.pid!;
            process.kill(pid, 'SIGSTOP');
            try {
              await reset();
              await fill(PEAK_EVENTS, ingestWriter);
            } catch (error) {
              process.kill(pid, 'SIGCONT');
              throw error;
            }
            const meters = {
              ...deliveryMeters(),
              postgres: cpuMeter(() => backendsOf(SERVER, 'audit_bench_delivery', [...RELAY_SESSIONS, ...WORKER_SESSIONS])),
            };
            process.kill(pid, 'SIGCONT');
            const drained = await waitForCount(PEAK_EVENTS);
            for (const [part, meter] of Object.entries(meters))
              onWriteCpuSeconds[part as keyof typeof onWriteCpuSeconds] += meter.elapsed();
            return (PEAK_EVENTS - 1) / ((drained.lastAt - drained.firstAt) / 1000);
          },
          bareSender,
        )
      : undefined;

  // Paced at half the peak, spread over all ten (healthy) endpoints.
  // Each also reports the cores its processes kept busy: at half the peak, the failures' retries and parkings
  // can take the machine to saturation, and then every endpoint's latency rises, the healthy ones' too.
  const paced = async (rate: number, healthy: string[]): Promise<{ latencies: number[]; coresBusy: number }> => {
    await reset();
    const meters = [processCpuMeter(), ...Object.values(deliveryMeters())];
    const tickMs = 20;
    const perTick = Math.max(1, Math.round((rate * tickMs) / 1000));
    const ticks = Math.round((PACED_SECONDS * 1000) / tickMs);
    let sent = 0;
    const started = Date.now();
    for (let tick = 0; tick < ticks; tick += 1) {
      const batch = Array.from({ length: perTick }, (_, index) => event(tenants[(tick * perTick + index) % tenants.length]!));
      await ingestWriter.write(batch, 'bench');
      sent += batch.filter((item) => healthy.includes(item.tenantId)).length;
      const wait = started + (tick + 1) * tickMs - Date.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    }
    await waitForCount(sent);
    const coresBusy = meters.reduce((sum, meter) => sum + meter.elapsed(), 0) / ((Date.now() - started) / 1000);
    return { latencies: (await stats(true)).latencies.sort((a, b) => a - b), coresBusy: Number(coresBusy.toFixed(2)) };
  };
  const halfRate = peakRate / 2;
  const { latencies: noFailure, coresBusy: pacedCoresBusy } = await paced(halfRate, tenants);

  // 20 % of the endpoints now fail (500) or hang: re-point two tenants' endpoints.
  await db.query(`UPDATE webhook_endpoints SET url = $1 WHERE tenant_id = 'bench-8'`, [`${receiverUrl}/fail`]);
  await db.query(`UPDATE webhook_endpoints SET url = $1 WHERE tenant_id = 'bench-9'`, [`${receiverUrl}/hang`]);
  const { latencies: withFailures, coresBusy: failingCoresBusy } = await paced(halfRate, tenants.slice(0, 8));

  await publisher?.drain();
  await bus.close();
  await db.close();
  // The service's processes stop first, so the second baseline has the machine as the first one had it.
  for (const child of children.splice(1)) child.kill('SIGTERM');
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const bareRuns = [...rounds.bareRuns, ...(onWrite?.bareRuns.slice(1) ?? []), await bareSender()];
  const bareRate = bareRuns.reduce((sum, rate) => sum + rate, 0) / bareRuns.length;
  const pathRate = rounds.rounds.reduce((sum, round) => sum + round.path_per_s, 0) / rounds.rounds.length;
  const report = {
    benchmark: 'webhook delivery',
    command: 'node bench/delivery.ts',
    layout: separate ? 'relay and worker in two processes' : 'relay and worker in one process',
    bare_sender_per_s: Math.round(bareRate),
    bare_sender_runs_per_s: bareRuns.map(Math.round),
    delivery_path_per_s: Math.round(pathRate),
    // The median of the rounds' ratios, each to the bare sender's runs just before and after it.
    delivery_path_ratio_vs_bare: rounds.medianRatio,
    delivery_path_rounds: rounds.rounds,
    // While the path drained, summed over the rounds.
    delivery_path_cpu_us_per_delivery: pathCpuUs,
    ...(roundStatements.length > 0 ? { delivery_path_statements_by_round: roundStatements } : {}),
    ...cpuYardstick(bareCpuSeconds, bareRate, { total: pathCpuUsTotal, worker: (cpuSeconds.worker * 1e6) / pathDeliveries }, pathRate),
    ...(onWrite
      ? {
          published_on_write_ratio_vs_bare: onWrite.medianRatio,
          published_on_write_rounds: onWrite.rounds,
          published_on_write_cpu_us_per_delivery: Object.fromEntries(
            Object.entries(onWriteCpuSeconds).map(([part, seconds]) => [
              part,
              Math.round((seconds * 1e6) / (PEAK_EVENTS * onWrite.rounds.length)),
            ]),
          ),
        }
      : {}),
    end_to_end_publisher: publisher ? 'the writer (as ingest)' : 'the relay',
    end_to_end_with_ingest_per_s: Math.round(peakRate),
    end_to_end_ratio_vs_bare: Number((peakRate / bareRate).toFixed(2)),
    end_to_end_cpu_us_per_event: endToEndCpuUs,
    ingest_during_peak_per_s: Math.round(ingestRate),
    paced_rate_per_s: Math.round(halfRate),
    latency_ms: { p50: percentile(noFailure, 50), p99: percentile(noFailure, 99), max: noFailure.at(-1) },
    with_20pct_failing_latency_ms: { p50: percentile(withFailures, 50), p99: percentile(withFailures, 99), max: withFailures.at(-1) },
    p99_ratio_failure_vs_none: Number((percentile(withFailures, 99) / Math.max(1, percentile(noFailure, 99))).toFixed(2)),
    paced_cores_busy: { no_failure: pacedCoresBusy, with_20pct_failing: failingCoresBusy },
    goals: { ratio_vs_bare: '>= 0.40', p50_ms: '< 50', p99_ms: '< 250', p99_ratio: '<= 2' },
  };
  console.log(JSON.stringify(report, null, 2));
}

/**
 * The rate ratio mixes two things: what each side costs in CPU, and how much of the machine each keeps busy.
 * `delivery_path_cpu_ratio_vs_bare` is the bare request's CPU (sender and receiver) over the path's per
 * delivery (every process of it): the rate ratio if both sides kept the same share of the cores busy, which
 * `cores_busy` shows (they did, 1.54-1.71 of two cores, in every run of 2026-11-26). The bare sender is one
 * Node thread and runs at about one core, so on two cores it is bound by its own thread while the path is
 * bound by the CPU of all its processes together. `worker_cpu_ratio_vs_bare_sender` compares the two Node
 * processes alone: the rate ratio where each is its side's limit (a worker with a core of its own, Postgres
 * and the receivers on other machines, as in production).
 */
function cpuYardstick(
  bare: { sender: number; receiver: number; requests: number; receiverRequests: number },
  bareRate: number,
  pathCpuUs: { total: number; worker: number },
  pathRate: number,
): Record<string, unknown> {
  const senderUs = (bare.sender * 1e6) / bare.requests;
  const receiverUs = (bare.receiver * 1e6) / bare.receiverRequests;
  const ratio = (value: number) => Number(value.toFixed(2));
  return {
    bare_sender_cpu_us_per_request: { sender: Math.round(senderUs), receiver: Math.round(receiverUs) },
    delivery_path_cpu_ratio_vs_bare: ratio((senderUs + receiverUs) / pathCpuUs.total),
    worker_cpu_ratio_vs_bare_sender: ratio(senderUs / pathCpuUs.worker),
    cores_busy: {
      bare: ratio(((senderUs + receiverUs) * bareRate) / 1e6),
      bare_sender: ratio((senderUs * bareRate) / 1e6),
      path: ratio((pathCpuUs.total * pathRate) / 1e6),
    },
  };
}

try {
  await main();
} finally {
  for (const child of children) child.kill('SIGTERM');
  await removeNamespaceStreams(NATS_URL, namespace);
}
