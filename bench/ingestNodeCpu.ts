/**
 * The ingest process's own CPU per event (issue 49): a JetStream drain against HTTP batches of the same
 * events, in one process, Postgres left out. `bench/ingest.ts` meters whole processes on a machine shared
 * with Postgres and NATS, where the rates and the CPU swing with the neighbours by more than the difference
 * between the two paths; this isolates the part the ingest code decides.
 *
 * - JetStream: the real JetStreamIngest on a private stream, events published beforehand, one per message;
 *   its writer does what EventWriter does in Node (the statement's column arrays, eventColumnArrays), then
 *   waits BENCH_COMMIT_MS (60 ms: a 1,000-event statement on this machine) as a commit would, and
 *   acknowledges as after a commit.
 * - Baseline, HTTP: the same events as bodies of 500, each parsed from its bytes (parseUtf8Json),
 *   validated (parseEventBatch) and turned into the same column arrays. Koa's own share is left out.
 *
 *   node bench/ingestNodeCpu.ts
 *   BENCH_INGEST_CPU_EVENTS=60000 BENCH_ROUNDS=3 BENCH_COMMIT_MS=60 node bench/ingestNodeCpu.ts
 *   BENCH_COMPARE_INGEST=/path/to/other/jetstreamIngest.ts node bench/ingestNodeCpu.ts
 *     (each round also drains through that module's JetStreamIngest, another build's, in the same process)
 */
import { randomBytes } from 'node:crypto';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { BusConnection } from '../src/bus/natsConnection.ts';
import { BusNames, ensureConsumer, ingestConsumerDefinition } from '../src/bus/jetStreamDefinitions.ts';
import { formatTimestamp } from '../src/events/eventFields.ts';
import { eventColumnArrays } from '../src/events/eventInsert.ts';
import type { NewEvent } from '../src/events/eventStore.ts';
import type { EventWriter } from '../src/events/eventWriter.ts';
import { parseEventBatch } from '../src/ingestion/eventInput.ts';
import { createLogger } from '../src/platform/logger.ts';
import { ServiceMetrics } from '../src/platform/metrics.ts';
import { parseUtf8Json } from '../src/platform/utf8Json.ts';
import { producerEvent } from './support/producers.ts';

const EVENTS = Number(process.env.BENCH_INGEST_CPU_EVENTS ?? 60_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const COMMIT_MS = Number(process.env.BENCH_COMMIT_MS ?? 60);
const HTTP_BATCH = 500;
type IngestModule = typeof import('../src/ingestion/jetstreamIngest.ts');
const ours = (await import('../src/ingestion/jetstreamIngest.ts')) as IngestModule;
const compared = process.env.BENCH_COMPARE_INGEST ? ((await import(process.env.BENCH_COMPARE_INGEST)) as IngestModule) : undefined;
const WINDOW = { maxAgeMs: 400 * 86_400_000, maxFutureSkewMs: 300_000 };

const columnArrays = (events: readonly NewEvent[]) =>
  eventColumnArrays(
    events,
    events.map((event) => formatTimestamp(event.occurredAtMs)),
    'compact',
  );
const cpuMicros = (since: NodeJS.CpuUsage) => {
  const used = process.cpuUsage(since);
  return used.user + used.system;
};

async function httpRound(): Promise<number> {
  const bodies = Array.from({ length: EVENTS / HTTP_BATCH }, (_, batch) =>
    Buffer.from(JSON.stringify({ events: Array.from({ length: HTTP_BATCH }, (_, i) => producerEvent('http', batch * HTTP_BATCH + i)) })),
  );
  const started = process.cpuUsage();
  for (const body of bodies) {
    const { events } = parseUtf8Json(body) as { events: unknown[] };
    columnArrays(parseEventBatch(events, WINDOW));
    // A request per turn of the event loop, as the server takes them.
    await new Promise((resolve) => setImmediate(resolve));
  }
  return cpuMicros(started) / EVENTS;
}

async function jetstreamRound({ JetStreamIngest }: IngestModule): Promise<number> {
  const nc = await connect({ servers: process.env.NATS_URL ?? '127.0.0.1:4222' });
  const names = new BusNames({ namespace: `benchcpu${randomBytes(3).toString('hex')}`, deploymentId: 'benchnodecpu' });
  const jsm = await jetstreamManager(nc);
  await ensureConsumer(jsm, ingestConsumerDefinition(names));
  const js = jetstream(nc);
  for (let start = 0; start < EVENTS; start += 1000) {
    await Promise.all(
      Array.from({ length: Math.min(1000, EVENTS - start) }, (_, i) =>
        js.publish(names.ingestSubject('jetstream'), JSON.stringify(producerEvent('jetstream', start + i))),
      ),
    );
  }
  let stored = 0;
  const { promise: drained, resolve } = Promise.withResolvers<void>();
  const writer = {
    async write(events: readonly NewEvent[]) {
      columnArrays(events);
      await new Promise((done) => setTimeout(done, COMMIT_MS));
      stored += events.length;
      if (stored >= EVENTS) resolve();
      return [];
    },
  } as unknown as EventWriter;
  const ingest = new JetStreamIngest({
    bus: { nc, connected: () => true, ping: () => nc.flush(), close: () => nc.close() } satisfies BusConnection,
    names,
    writer,
    window: WINDOW,
    log: createLogger('warn'),
    metrics: new ServiceMetrics(),
  });
  const started = process.cpuUsage();
  await ingest.start();
  await drained;
  const perEvent = cpuMicros(started) / EVENTS;
  await ingest.stop();
  await jsm.streams.delete(names.ingestStream());
  await nc.close();
  return perEvent;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const micros = (value: number) => Number(value.toFixed(1));
const rounds: Array<{ http_us: number; jetstream_us: number; ratio: number; compared_jetstream_us?: number; compared_ratio?: number }> = [];
for (let round = 0; round < ROUNDS; round += 1) {
  const http = await httpRound();
  const js = await jetstreamRound(ours);
  const other = compared && (await jetstreamRound(compared));
  rounds.push({
    http_us: micros(http),
    jetstream_us: micros(js),
    ratio: Number((js / http).toFixed(2)),
    ...(other === undefined ? {} : { compared_jetstream_us: micros(other), compared_ratio: Number((other / http).toFixed(2)) }),
  });
}
const medianOf = (key: keyof (typeof rounds)[number]) => {
  const values = rounds.map((round) => round[key]).filter((value) => value !== undefined);
  return values.length === 0 ? undefined : median(values);
};
console.log(
  JSON.stringify(
    {
      benchmark: 'ingest-node-cpu',
      command: 'node bench/ingestNodeCpu.ts',
      events: EVENTS,
      commit_ms: COMMIT_MS,
      rounds,
      median: {
        http_us_per_event: medianOf('http_us'),
        jetstream_us_per_event: medianOf('jetstream_us'),
        ratio: medianOf('ratio'),
        compared_jetstream_us_per_event: medianOf('compared_jetstream_us'),
        compared_ratio: medianOf('compared_ratio'),
      },
      load_average: (await import('node:os')).loadavg().map((value) => Number(value.toFixed(1))),
    },
    null,
    2,
  ),
);
