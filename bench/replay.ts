/**
 * Webhook replay benchmark (issue 17): a replay of 100,000 events to a healthy receiver against the bare
 * undici sender in the same run (goal ≥ 0.3×); live deliveries' p99 at half the peak rate during a replay
 * (live traffic starting after the replay has run alone for BENCH_REPLAY_HEAD_START_MS) against the same
 * without one (goal ≤ 2×); and the delivery path with the receiver answering with a body,
 * so that every attempt records its response excerpt (goal ≥ 0.40× the bare sender), in rounds as in
 * bench/delivery.ts.
 *
 *   node bench/replay.ts            (make bench runs it too)
 *
 * Processes as in bench/delivery.ts, measured warm as there: this driver writes events through the service's write path and starts
 * replays through the service's own domain object; one relay process (which runs the replays) and one
 * worker process deliver; the live and the replay receivers run in processes of their own, so that old
 * replayed timestamps never mix with live latencies.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Database } from '../src/db/database.ts';
import { DeliveryCursorCodec } from '../src/delivery/deliveryCursor.ts';
import type { NewEvent } from '../src/events/eventStore.ts';
import { EventWriter } from '../src/events/eventWriter.ts';
import { createLogger } from '../src/platform/logger.ts';
import { WebhookDeliveries } from '../src/delivery/deliveryOperations.ts';
import { SecretBox } from '../src/webhooks/secretBox.ts';
import { WebhookRegistry } from '../src/webhooks/webhookRegistry.ts';
import { removeNamespaceStreams } from '../test/support/natsNamespaces.ts';
import { newEvent } from '../test/support/newEvents.ts';
import { freshDatabase, percentile, spawnReporting, type ReportingChild } from './support/processes.ts';
import { measurePathRounds } from './support/pathRounds.ts';
import { startWarmDelivery } from './support/warmDelivery.ts';
import { WEBHOOK_FAN_OUT } from '../src/delivery/fanOut.ts';
import { ENDPOINT_DELIVERIES } from '../src/delivery/endpointDeliveries.ts';

const SERVER = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432';
const DATABASE_URL = `${SERVER}/audit_bench_replay`;
const ENCRYPTION_KEY = randomBytes(32).toString('hex');
const REPLAY_EVENTS = Number(process.env.BENCH_REPLAY_EVENTS ?? 100_000);
const PATH_EVENTS = Number(process.env.BENCH_DELIVERY_EVENTS ?? 50_000);
const WARMUP_EVENTS = Number(process.env.BENCH_DELIVERY_WARMUP ?? 20_000);
const PACED_SECONDS = Number(process.env.BENCH_DELIVERY_SECONDS ?? 10);
const PATH_ROUNDS = Number(process.env.BENCH_PATH_ROUNDS ?? 3);
/**
 * How long the second replay runs alone before live traffic starts. A replay alone keeps more deliveries
 * pending than one beside live traffic (replayRunner.ts), and the live deliveries that arrive first find
 * them queued ahead in the relay and JetStream: this measures that moment too, not only a replay that saw
 * live traffic from its first chunk.
 */
const REPLAY_HEAD_START_MS = Number(process.env.BENCH_REPLAY_HEAD_START_MS ?? 2_000);
const CONCURRENCY = 16;
const DAY_MS = 86_400_000;
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

interface ReceiverStats {
  count: number;
  firstAt: number;
  lastAt: number;
  latencies: number[];
}

/** A receiver process and its counters. */
async function receiver() {
  const { firstLine } = node(['bench/webhookReceiver.ts']);
  const { port } = await firstLine;
  const url = `http://127.0.0.1:${port}`;
  const stats = async (latencies = false): Promise<ReceiverStats> =>
    (await fetch(`${url}/stats${latencies ? '?latencies=1' : ''}`)).json() as Promise<ReceiverStats>;
  const reset = async () => void (await fetch(`${url}/reset`));
  const waitForCount = async (count: number, timeoutMs = 300_000): Promise<ReceiverStats> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const current = await stats();
      if (current.count >= count) return current;
      if (Date.now() > deadline) throw new Error(`only ${current.count} of ${count} deliveries arrived`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  return { url, stats, reset, waitForCount };
}

async function main(): Promise<void> {
  await freshDatabase(SERVER, 'audit_bench_replay', log);
  const live = await receiver();
  const replayed = await receiver();

  // The bare sender against the same receiver and path (/body: a 300-byte answer), before and after.
  const bareSender = async (): Promise<number> => {
    const bare = node(['bench/bareSender.ts'], {
      TARGET_URL: `${live.url}/body`,
      COUNT: String(PATH_EVENTS),
      WARMUP: String(WARMUP_EVENTS),
      CONCURRENCY: String(CONCURRENCY),
    });
    const result = (await bare.firstLine) as { sent: number; seconds: number };
    await live.reset();
    return result.sent / result.seconds;
  };
  const bareFirst = await bareSender();

  const db = new Database({ url: DATABASE_URL, poolSize: 8, applicationName: 'bench driver', log });
  const writer = new EventWriter(db, WEBHOOK_FAN_OUT);
  const registry = new WebhookRegistry({
    db,
    writer,
    deliveries: ENDPOINT_DELIVERIES,
    secrets: new SecretBox(ENCRYPTION_KEY),
    policy: { allowHttp: true, allowPrivateTargets: true },
  });
  const operations = new WebhookDeliveries({ db, writer, cursors: new DeliveryCursorCodec('bench-pepper-0123456789abcdef0123456789') });
  const actor = { userId: 'bench', userRole: 'operator' };
  const writeEvents = async (count: number, make: (index: number) => NewEvent) => {
    for (let written = 0; written < count; written += 500) {
      await writer.write(
        Array.from({ length: Math.min(500, count - written) }, (_, index) => make(written + index)),
        'bench',
      );
    }
  };

  // The replay's events: written before their endpoint exists, so only a replay delivers them (a backfill).
  const replayStart = Date.now() - 2 * DAY_MS;
  await writeEvents(REPLAY_EVENTS, (index) =>
    newEvent({ tenantId: 'replayed', occurredAtMs: replayStart + index * 10, details: '{"reason":"bench"}' }),
  );
  const liveTenants = Array.from({ length: 10 }, (_, index) => `live-${index}`);
  for (const tenant of liveTenants) await registry.register(tenant, { url: `${live.url}/body`, event_filter: ['phi.'] }, actor);

  // The delivery path with excerpts: the outbox filled first, then drained by the relay and a warm worker.
  const serviceEnv = {
    DATABASE_URL,
    NATS_NAMESPACE: namespace,
    SECRET_ENCRYPTION_KEY: ENCRYPTION_KEY,
    WEBHOOK_ALLOW_HTTP: 'true',
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    DELIVERY_ENDPOINT_CONCURRENCY: String(CONCURRENCY),
    HOST: '127.0.0.1',
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
  };
  const warm = await startWarmDelivery(
    {
      spawn: node,
      env: serviceEnv,
      workerPort: 18192,
      relayPort: 18191,
      warmupEvents: WARMUP_EVENTS,
      fill: (count) => writeEvents(count, () => newEvent({ tenantId: liveTenants[0]!, details: '{"reason":"bench"}' })),
      delivered: (count) => live.waitForCount(count),
      resetReceiver: live.reset,
    },
    PATH_EVENTS,
  );
  const rounds = await measurePathRounds(
    PATH_ROUNDS,
    bareFirst,
    async (round) => {
      if (round > 0) await warm.refill(PATH_EVENTS);
      const drained = await live.waitForCount(PATH_EVENTS);
      return (PATH_EVENTS - 1) / ((drained.lastAt - drained.firstAt) / 1000);
    },
    bareSender,
  );
  const pathRate = rounds.rounds.reduce((sum, round) => sum + round.path_per_s, 0) / rounds.rounds.length;
  const excerpts = await db.query<{ recorded: number; bytes: number }>(
    `SELECT count(*)::int AS recorded, max(octet_length(response_excerpt))::int AS bytes FROM delivery_attempts WHERE response_excerpt <> ''`,
  );

  // Live events paced at half the delivery path's rate over the ten live endpoints; latencies per delivery.
  const halfRate = pathRate / 2;
  const paced = async (): Promise<number[]> => {
    await live.reset();
    const tickMs = 20;
    const perTick = Math.max(1, Math.round((halfRate * tickMs) / 1000));
    const ticks = Math.round((PACED_SECONDS * 1000) / tickMs);
    const started = Date.now();
    for (let tick = 0; tick < ticks; tick += 1) {
      await writer.write(
        Array.from({ length: perTick }, (_, index) =>
          newEvent({ tenantId: liveTenants[(tick * perTick + index) % 10]!, details: '{"reason":"bench"}' }),
        ),
        'bench',
      );
      const wait = started + (tick + 1) * tickMs - Date.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    }
    await live.waitForCount(perTick * ticks);
    return (await live.stats(true)).latencies.sort((a, b) => a - b);
  };
  const withoutReplay = await paced();

  // A replay alone: 100,000 events to a healthy receiver, timed from the request to the last receipt.
  const { endpoint } = await registry.register('replayed', { url: `${replayed.url}/body`, event_filter: ['phi.'] }, actor);
  const range = { since: new Date(replayStart).toISOString(), until: new Date().toISOString() };
  await replayed.reset();
  const replayAsked = Date.now();
  const first = await operations.startReplay('replayed', endpoint.id, { ...range, only_undelivered: true }, actor);
  const replayDone = await replayed.waitForCount(REPLAY_EVENTS);
  const replayRate = REPLAY_EVENTS / ((replayDone.lastAt - replayAsked) / 1000);
  const firstResult = await operations.getReplay('replayed', endpoint.id, first.id);

  // Live deliveries at half the peak again, now while a second replay of the same range runs.
  await waitUntilCompleted(operations, endpoint.id, first.id);
  await replayed.reset();
  const second = await operations.startReplay('replayed', endpoint.id, { ...range, only_undelivered: false }, actor);
  await new Promise((resolve) => setTimeout(resolve, REPLAY_HEAD_START_MS));
  const replayedBeforeLiveTraffic = (await replayed.stats()).count;
  const duringReplay = await paced();
  const replayedMeanwhile = (await replayed.stats()).count;
  const secondAtEnd = await operations.getReplay('replayed', endpoint.id, second.id);
  await replayed.waitForCount(REPLAY_EVENTS);

  await db.close();
  for (const child of children.splice(2)) child.kill('SIGTERM');
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const bareRuns = [...rounds.bareRuns, await bareSender()];
  const bareRate = bareRuns.reduce((sum, rate) => sum + rate, 0) / bareRuns.length;
  const report = {
    benchmark: 'webhook replay',
    command: 'node bench/replay.ts',
    bare_sender_per_s: Math.round(bareRate),
    bare_sender_runs_per_s: bareRuns.map(Math.round),
    delivery_path_with_excerpts_per_s: Math.round(pathRate),
    // The median of the rounds' ratios, each to the bare sender's runs just before and after it.
    delivery_path_with_excerpts_ratio_vs_bare: rounds.medianRatio,
    delivery_path_with_excerpts_rounds: rounds.rounds,
    excerpts_recorded: excerpts.rows[0],
    replay_events: REPLAY_EVENTS,
    replay_result: {
      events_matched: firstResult.eventsMatched,
      deliveries_created: firstResult.deliveriesCreated,
      status: firstResult.status,
    },
    replay_per_s: Math.round(replayRate),
    replay_ratio_vs_bare: Number((replayRate / bareRate).toFixed(2)),
    paced_rate_per_s: Math.round(halfRate),
    live_latency_ms: { p50: percentile(withoutReplay, 50), p99: percentile(withoutReplay, 99), max: withoutReplay.at(-1) },
    live_latency_during_replay_ms: { p50: percentile(duringReplay, 50), p99: percentile(duringReplay, 99), max: duringReplay.at(-1) },
    replayed_before_live_traffic: replayedBeforeLiveTraffic,
    replayed_during_paced_phase: replayedMeanwhile - replayedBeforeLiveTraffic,
    replay_still_running_at_end_of_phase: secondAtEnd.status === 'running',
    p99_ratio_replay_vs_none: Number((percentile(duringReplay, 99) / Math.max(1, percentile(withoutReplay, 99))).toFixed(2)),
    goals: { replay_ratio_vs_bare: '>= 0.30', p99_ratio: '<= 2', delivery_path_ratio_vs_bare: '>= 0.40' },
  };
  console.log(JSON.stringify(report, null, 2));
}

async function waitUntilCompleted(operations: WebhookDeliveries, endpointId: string, replayId: string): Promise<void> {
  for (;;) {
    if ((await operations.getReplay('replayed', endpointId, replayId)).status !== 'running') return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

try {
  await main();
} finally {
  for (const child of children) child.kill('SIGTERM');
  await removeNamespaceStreams(NATS_URL, namespace);
}
