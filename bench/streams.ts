/**
 * Log streams benchmark (issues 32 and 44), five phases on a fresh database `audit_bench_streams`, every figure
 * next to its baseline measured in the same run:
 *
 * 1. Throughput. BENCH_STREAMS_EVENTS (100,000) events of one tenant are written and sealed; a native stream
 *    backfills them to a loopback HEC receiver in this process, delivered by a streams role in its own
 *    process (the built CLI, as the image runs it). Baseline: a bare batch sender, this process posting the
 *    same batches (the stream's own HEC items as text, cut at the same 1 MB, joined and gzipped per request)
 *    one after another to the same receiver. Ratio = stream events/s ÷ bare events/s (goal ≥ 0.7). A first pair
 *    warms both sides up and is printed apart (a cold streams process and its thread read 0.54–0.72 where the
 *    rounds after read 0.85–1.04); then BENCH_STREAMS_ROUNDS (3) pairs of the two, alternating, each stream a
 *    new one backfilling the same events: the pair with the median ratio is printed, with every pair's rates
 *    and ratio.
 * 2. Full rate. HTTP ingest as bench/ingest.ts drives it (4 producers, batches of 500, as fast as the ingest
 *    role answers) for BENCH_STREAMS_FULL_S seconds, with the sealer and the streams role running and a stream
 *    following the tenant: ingest events/s, the stream's delivered events/s over the same window, and how
 *    long after the last write the stream has delivered every event (goal: it keeps up).
 * 3. Half rate. Ingest paced at half the rate phase 2 reached, for BENCH_STREAMS_HALF_S seconds; each event's
 *    lag is its arrival at the receiver minus its timestamp (set by the producer when it sends it): p50, p99
 *    and max against SEAL_INTERVAL + 5 s (goal p99 ≤ it).
 *
 * 4. HEC with indexer acknowledgement (hec_ack): phase 1 again with a token whose batches the receiver answers
 *    with an ackId and acknowledges on the first ack query, the stream waiting for each batch's ack before the
 *    next. Baseline: the bare sender, polling each batch's ack on the stream's own schedule
 *    (bench/support/streamBaselines.ts). Ratio as in phase 1 (goal ≥ 0.7).
 * 5. AMQP (amqp): the stream backfills the events to the machine's RabbitMQ (an exchange and queue of this run,
 *    deleted at the end), each record a persistent message, confirmed batch by batch. Baseline: a bare amqplib
 *    publisher with confirms sending the same messages in the same batches. Ratio as in phase 1 (goal ≥ 0.7).
 *
 *   node bench/streams.ts                       (BENCH_STREAMS_PHASES=throughput,hec_ack,amqp,live: which phases;
 *                                                live is phases 2 and 3)
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateKeyPairSync } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import { connect } from 'amqplib';
import { Agent } from 'undici';
import { BinaryRows } from '../src/db/binaryCopy.ts';
import { Database } from '../src/db/database.ts';
import { WEBHOOK_FAN_OUT } from '../src/delivery/fanOut.ts';
import { copyLeafDocuments } from '../src/events/leafChunks.ts';
import { EventWriter } from '../src/events/eventWriter.ts';
import { Sealer } from '../src/integrity/sealer.ts';
import { TreeHeadSigner } from '../src/integrity/treeHeadSigner.ts';
import { latestTreeHead } from '../src/integrity/treeStore.ts';
import { createLogger } from '../src/platform/logger.ts';
import { HecItems, itemEncoderOf } from '../src/streams/destinations/itemEncoders.ts';
import { cutBatches } from '../src/streams/batches.ts';
import { recordsOfLeafRows, treeHeadRecord } from '../src/streams/records.ts';
import { StreamRegistry } from '../src/streams/streamRegistry.ts';
import { SecretBox } from '../src/webhooks/secretBox.ts';
import { newEvent } from '../test/support/newEvents.ts';
import { SERVER_URL } from './support/listDataset.ts';
import { producerEvent } from './support/producers.ts';
import { bareAmqpPublisher, bareHecWithAcks } from './support/streamBaselines.ts';
import {
  BENCH_ENCRYPTION_KEY,
  BENCH_INGEST_TOKEN,
  backendsOf,
  builtCli,
  cpuMeter,
  freePort,
  freshDatabase,
  percentile,
  processCpuMeter,
  startNode,
  stopProcess,
  waitForHttp,
} from './support/processes.ts';
import { removeNamespaceStreams } from '../test/support/natsNamespaces.ts';

const NAME = 'audit_bench_streams';
const DATABASE_URL = `${SERVER_URL}/${NAME}`;
const EVENTS = Number(process.env.BENCH_STREAMS_EVENTS ?? 100_000);
const FULL_S = Number(process.env.BENCH_STREAMS_FULL_S ?? 20);
const HALF_S = Number(process.env.BENCH_STREAMS_HALF_S ?? 30);
const ROUNDS = Number(process.env.BENCH_STREAMS_ROUNDS ?? 3);
const PHASES = new Set((process.env.BENCH_STREAMS_PHASES ?? 'throughput,hec_ack,amqp,live').split(','));
/** The machine's RabbitMQ, shared: phase 5's exchange and queue are this run's own and deleted after. */
const BROKER_URL = process.env.BENCH_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const SEAL_INTERVAL_MS = 10_000;
const log = createLogger('warn');

// --- A loopback HEC: checks the token, gunzips, counts the native events per tenant, and for the tenant
// being timed parses each event's timestamp. It answers as HEC does, {"text":"Success","code":0}.
const counted = new Map<string, number>();
const lags: number[] = [];
let timedTenant = '';
/** When the receiver first counted an event of each tenant. */
const firstArrival = new Map<string, number>();
const receiver = createServer((request, response) => {
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    const acking = request.headers.authorization === 'Splunk bench-ack-token';
    if (request.headers.authorization !== 'Splunk bench-token' && !acking) {
      response.writeHead(403).end('{"text":"Invalid token","code":4}');
      return;
    }
    if (request.url === '/services/collector/ack') {
      // Every batch is indexed by the time it is asked about: the wait measured is the polling's own.
      const { acks } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { acks: number[] };
      response
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ acks: Object.fromEntries(acks.map((id) => [id, true])) }));
      return;
    }
    const now = Date.now();
    for (const line of gunzipSync(Buffer.concat(chunks)).toString('utf8').split('\n')) {
      if (!line.includes('"sourcetype":"audit-trail:native"')) continue;
      const tenant = /"tenant_id":"([^"]+)"/.exec(line)![1]!;
      counted.set(tenant, (counted.get(tenant) ?? 0) + 1);
      if (!firstArrival.has(tenant)) firstArrival.set(tenant, performance.now());
      if (tenant === timedTenant) lags.push(now - Date.parse(/"timestamp":"([^"]+)"/.exec(line)![1]!));
    }
    if (!acking) {
      response.writeHead(200, { 'content-type': 'application/json' }).end('{"text":"Success","code":0}');
      return;
    }
    const channel = String(request.headers['x-splunk-request-channel']);
    const ackId = nextAckIds.get(channel) ?? 0;
    nextAckIds.set(channel, ackId + 1);
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ text: 'Success', code: 0, ackId }));
  });
});
/** The next ackId of each channel, for the acknowledging token. */
const nextAckIds = new Map<string, number>();
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
const hecUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
const countOf = (tenant: string) => counted.get(tenant) ?? 0;

async function waitUntil(condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

await freshDatabase(SERVER_URL, NAME, log);
const db = new Database({ url: DATABASE_URL, poolSize: 4, applicationName: 'bench streams', log });
const writer = new EventWriter(db, WEBHOOK_FAN_OUT);
const { privateKey } = generateKeyPairSync('ed25519');
const signingPem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const registry = new StreamRegistry({
  db,
  writer,
  secrets: new SecretBox(BENCH_ENCRYPTION_KEY),
  policy: { allowHttp: true, allowPrivateTargets: true },
  destinations: { timeoutMs: 30_000, allowPrivateTargets: true },
});
const hecDestination = { type: 'splunk_hec', url: hecUrl, token: 'bench-token' };

// --- Phase 1: the backlog, written and sealed before anything is timed.
const base = Date.now() - 3_600_000;
for (let start = 0; start < EVENTS; start += 1000) {
  const batch = Array.from({ length: Math.min(1000, EVENTS - start) }, (_, index) =>
    newEvent({
      tenantId: 'backlog',
      occurredAtMs: base + start + index,
      resourceId: `p-${start + index}`,
      details: `{"ward":"${index % 40}"}`,
    }),
  );
  await writer.write(batch, 'bench');
}
const sealer = new Sealer({ db, signer: new TreeHeadSigner(privateKey), intervalMs: 3_600_000, heartbeatMs: 3_600_000, log });
await sealer.registerKey();
while ((await sealer.sealPass()).sealed > 0);

// The bare batch sender's batches: the stream's own (its records, HEC items and cuts), each kept as its items'
// text, which the sender joins and compresses per request as it always has (the baseline of every earlier run).
const hec = new HecItems({}, 'native');
const head = treeHeadRecord((await latestTreeHead(db, 'backlog'))!, 0);
const batches: string[][] = [];
for (let position = 0; position < EVENTS; position += 5000) {
  const rows = new BinaryRows(await copyLeafDocuments(db, 'backlog', position, 5000, { actionPrefixes: [], phiInvolved: undefined }));
  const span = { streamId: 'bare', tenantId: 'backlog', firstLeaf: position, lastLeaf: position + 4999 };
  for (const batch of cutBatches(hec, hec.limits, span, recordsOfLeafRows('native', '1.7.0', 'backlog', rows), head))
    batches.push(gunzipSync(batch.encoded.body).toString('utf8').split('\n'));
}

const streamsPort = await freePort();
const streamsEnv = {
  DATABASE_URL,
  SECRET_ENCRYPTION_KEY: BENCH_ENCRYPTION_KEY,
  WEBHOOK_ALLOW_HTTP: 'true',
  WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
  STREAMS_POLL_MS: '100',
  HOST: '127.0.0.1',
  LOG_LEVEL: 'warn',
};
const streams = startNode(builtCli('serve', '--roles', 'streams'), { ...streamsEnv, INTERNAL_PORT: String(streamsPort) });
await waitForHttp(`http://127.0.0.1:${streamsPort}/healthz`);
const cpuSeconds = (meter: { elapsed(): number }) => Number(meter.elapsed().toFixed(2));

/** The bare sender: the batches posted one after another by this process, which also receives them. */
async function bareRound(): Promise<Round> {
  const agent = new Agent({ connections: 1 });
  const cpu = processCpuMeter();
  const started = performance.now();
  for (const items of batches) {
    const response = await agent.request({
      origin: hecUrl,
      path: '/services/collector/event',
      method: 'POST',
      headers: { authorization: 'Splunk bench-token', 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: gzipSync(items.join('\n')),
    });
    await response.body.text();
  }
  const seconds = (performance.now() - started) / 1000;
  const cpuS = cpu.elapsed();
  await agent.close();
  const delivered = countOf('backlog');
  counted.delete('backlog');
  firstArrival.delete('backlog');
  return { seconds, delivered, cpuS };
}

/** A new stream to `destination` backfilling the tenant from before its first event; deleted once everything arrived. */
async function streamRound(
  destination: Record<string, unknown> = hecDestination,
  arrived = () => countOf('backlog') >= EVENTS,
): Promise<Round> {
  // CPU of the stream's side: the streams process, its Postgres sessions (the `audit-trail …` ones), and this
  // process, which receives (the bare sender's CPU is this process's alone: it sends and receives).
  const cpu = {
    streams: cpuMeter(() => [streams.pid!]),
    postgres: cpuMeter(() => backendsOf(SERVER_URL, NAME, ['audit-trail'])),
    receiver: processCpuMeter(),
  };
  const started = performance.now();
  const { stream } = await registry.create(
    'backlog',
    { destination, start_at: new Date(base - 1000).toISOString() },
    { userId: 'bench', userRole: 'bench' },
  );
  await waitUntil(arrived, 600_000);
  const seconds = (performance.now() - started) / 1000;
  // Only the HEC receiver sees events arrive one by one (an AMQP round is watched by its queue's length).
  const first = firstArrival.get('backlog');
  const firstS = first === undefined ? undefined : (first - started) / 1000;
  const cpuS = { streams: cpuSeconds(cpu.streams), postgres: cpuSeconds(cpu.postgres), receiver: cpuSeconds(cpu.receiver) };
  await registry.delete('backlog', stream.id, { userId: 'bench', userRole: 'bench' });
  counted.delete('backlog');
  firstArrival.delete('backlog');
  return { seconds, firstS, cpuS, delivered: EVENTS };
}

interface Round {
  readonly seconds: number;
  readonly delivered: number;
  readonly firstS?: number;
  readonly cpuS?: number | Record<string, number>;
}

/**
 * A warm-up pair, not counted (the first stream round is a cold process and thread: its JIT, its first
 * connections), then BENCH_STREAMS_ROUNDS pairs, bare then stream: on a shared machine one pair's ratio moves
 * with whoever else runs; printed are the pair with the median ratio, and every pair's rates and ratio.
 */
async function pairedRounds(
  phase: string,
  bareOnce: () => Promise<Round>,
  streamOnce: () => Promise<Round>,
  extra: Record<string, unknown> = {},
) {
  const warmup = { bare: await bareOnce(), stream: await streamOnce() };
  const rounds = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    const bare = await bareOnce();
    const stream = await streamOnce();
    rounds.push({ bare, stream, ratio: bare.seconds / stream.seconds });
  }
  const median = [...rounds].sort((a, b) => a.ratio - b.ratio)[Math.floor(rounds.length / 2)]!;
  const { bare, stream } = median;
  const cpu = (value: Round['cpuS']) => (typeof value === 'number' ? Number(value.toFixed(2)) : value);
  console.log(
    JSON.stringify({
      phase,
      events: EVENTS,
      ...extra,
      bare_events: bare.delivered,
      bare_events_per_s: Math.round(bare.delivered / bare.seconds),
      stream_events_per_s: Math.round(EVENTS / stream.seconds),
      ratio: Number(median.ratio.toFixed(2)),
      // Diagnostics, not the goal's figures: how long the stream took to deliver its first event (the role
      // noticing the stream, its first read), its rate from then on, and the CPU seconds each side spent.
      ...(stream.firstS === undefined
        ? {}
        : {
            stream_first_event_s: Number(stream.firstS.toFixed(2)),
            stream_events_per_s_after_first: Math.round(EVENTS / (stream.seconds - stream.firstS)),
          }),
      ...(bare.cpuS === undefined ? {} : { bare_cpu_s: cpu(bare.cpuS), stream_cpu_s: cpu(stream.cpuS) }),
      warmup_ratio: Number((warmup.bare.seconds / warmup.stream.seconds).toFixed(2)),
      ...(rounds.length > 1
        ? {
            rounds: rounds.map((each) => ({
              bare_events_per_s: Math.round(each.bare.delivered / each.bare.seconds),
              stream_events_per_s: Math.round(EVENTS / each.stream.seconds),
              ratio: Number(each.ratio.toFixed(2)),
            })),
          }
        : {}),
    }),
  );
}

if (PHASES.has('throughput')) await pairedRounds('throughput', bareRound, () => streamRound(), { bare_batches: batches.length });

if (PHASES.has('hec_ack')) {
  await pairedRounds(
    'hec_ack',
    async () => {
      const seconds = await bareHecWithAcks(hecUrl, 'bench-ack-token', batches);
      const delivered = countOf('backlog');
      counted.delete('backlog');
      firstArrival.delete('backlog');
      return { seconds, delivered };
    },
    () => streamRound({ ...hecDestination, token: 'bench-ack-token' }),
    { bare_batches: batches.length },
  );
}

if (PHASES.has('amqp')) await amqpPhase();

/** Phase 5: the same events to the machine's RabbitMQ, against a bare amqplib publisher with confirms. */
async function amqpPhase(): Promise<void> {
  const name = `audit-trail-bench-${process.pid}`;
  const admin = await connect(BROKER_URL);
  const channel = await admin.createChannel();
  await channel.assertExchange(name, 'topic', { durable: false });
  await channel.assertQueue(name, { durable: false });
  await channel.bindQueue(name, name, '#');
  // The stream's messages, cut as its batches are (leaf chunks of 5,000, batches within the AMQP limits).
  const destination = {
    type: 'amqp',
    url: BROKER_URL.replace(/\/\/[^@]*@/, '//'),
    username: 'guest',
    password: 'guest',
    exchange: name,
  } as const;
  const encoder = itemEncoderOf(destination, 'native');
  const messages: Buffer[][] = [];
  for (let position = 0; position < EVENTS; position += 5000) {
    const rows = new BinaryRows(await copyLeafDocuments(db, 'backlog', position, 5000, { actionPrefixes: [], phiInvolved: undefined }));
    const span = { streamId: 'bare', tenantId: 'backlog', firstLeaf: position, lastLeaf: position + 4999 };
    for (const batch of cutBatches(encoder, encoder.limits, span, recordsOfLeafRows('native', '1.7.0', 'backlog', rows), head))
      messages.push(
        batch.encoded.body
          .toString('utf8')
          .trimEnd()
          .split('\n')
          .map((line) => Buffer.from(line)),
      );
  }
  const total = messages.reduce((sum, batch) => sum + batch.length, 0);
  const queued = async () => (await channel.checkQueue(name)).messageCount;
  const emptied = async <T>(round: T) => {
    await channel.purgeQueue(name);
    return round;
  };
  let arrived = false;
  await pairedRounds(
    'amqp',
    async () => {
      const seconds = await bareAmqpPublisher(BROKER_URL, name, 'audit.native.backlog', messages);
      return emptied({ seconds, delivered: (await queued()) - (total - EVENTS) });
    },
    async () => {
      // Polled between the stream round's checks: the queue holds every message once the stream is done.
      const watch = setInterval(() => void queued().then((count) => (arrived = count >= total)), 50);
      const round = await streamRound(destination, () => arrived);
      clearInterval(watch);
      arrived = false;
      return emptied(round);
    },
    { messages: total, batches: messages.length },
  );
  await channel.deleteQueue(name);
  await channel.deleteExchange(name);
  await admin.close();
}

if (!PHASES.has('live')) {
  await stopProcess(streams);
  await db.close();
  receiver.close();
  process.exit(0);
}

// --- Phases 2 and 3: ingest and the sealer in processes of their own, beside the streams role.
// Their JetStream names (the ingest role's streams, the sealer's signed heads), removed from the machine's NATS
// when the run ends.
const NAMESPACE = `benchstreams${process.pid}`;
const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const ingestPort = await freePort();
const ingest = startNode(builtCli('serve', '--roles', 'ingest'), {
  DATABASE_URL,
  INGEST_TOKENS: BENCH_INGEST_TOKEN,
  NATS_NAMESPACE: NAMESPACE,
  HOST: '127.0.0.1',
  INTERNAL_PORT: String(ingestPort),
  LOG_LEVEL: 'warn',
});
const sealerPort = await freePort();
const sealerProcess = startNode(builtCli('serve', '--roles', 'sealer'), {
  DATABASE_URL,
  NATS_NAMESPACE: NAMESPACE,
  SEAL_SIGNING_KEY: signingPem,
  SEAL_INTERVAL: `${SEAL_INTERVAL_MS}ms`,
  HOST: '127.0.0.1',
  INTERNAL_PORT: String(sealerPort),
  LOG_LEVEL: 'warn',
});
await waitForHttp(`http://127.0.0.1:${ingestPort}/readyz`);
await waitForHttp(`http://127.0.0.1:${sealerPort}/readyz`);

async function post(tenant: string, size: number, offset: number): Promise<void> {
  const body = JSON.stringify({ events: Array.from({ length: size }, (_, index) => producerEvent(tenant, offset + index)) });
  const response = await fetch(`http://127.0.0.1:${ingestPort}/internal/v1/events`, {
    method: 'POST',
    headers: { authorization: `Bearer ${BENCH_INGEST_TOKEN}`, 'content-type': 'application/json' },
    body,
  });
  if (!response.ok) throw new Error(`ingest answered ${response.status}`);
  await response.arrayBuffer();
}

await registry.create('live', { destination: hecDestination }, { userId: 'bench', userRole: 'bench' });
let written = 0;
const fullStarted = performance.now();
const fullEnds = Date.now() + FULL_S * 1000;
await Promise.all(
  Array.from({ length: 4 }, async () => {
    while (Date.now() < fullEnds) {
      const offset = written;
      written += 500;
      await post('live', 500, offset);
    }
  }),
);
const fullSeconds = (performance.now() - fullStarted) / 1000;
const deliveredInWindow = countOf('live');
const ingestEnded = performance.now();
await waitUntil(() => countOf('live') >= written, 300_000);
const drainSeconds = (performance.now() - ingestEnded) / 1000;
const fullRate = written / fullSeconds;
console.log(
  JSON.stringify({
    phase: 'full_rate',
    seconds: Number(fullSeconds.toFixed(1)),
    ingest_events_per_s: Math.round(fullRate),
    stream_events_per_s_in_window: Math.round(deliveredInWindow / fullSeconds),
    stream_events_per_s_to_drain: Math.round(written / (fullSeconds + drainSeconds)),
    drained_after_last_write_s: Number(drainSeconds.toFixed(1)),
    bound_s: SEAL_INTERVAL_MS / 1000 + 5,
  }),
);

// Phase 3: half that rate, in batches of 100 sent on a schedule.
await registry.create('paced', { destination: hecDestination }, { userId: 'bench', userRole: 'bench' });
timedTenant = 'paced';
const perSecond = fullRate / 2;
const batch = 100;
const intervalMs = (batch / perSecond) * 1000;
const pacedStarted = Date.now();
let sent = 0;
const inFlight: Promise<void>[] = [];
for (let tick = 0; Date.now() - pacedStarted < HALF_S * 1000; tick += 1) {
  const due = pacedStarted + tick * intervalMs;
  if (due > Date.now()) await new Promise((resolve) => setTimeout(resolve, due - Date.now()));
  inFlight.push(post('paced', batch, sent));
  sent += batch;
}
await Promise.all(inFlight);
await waitUntil(() => countOf('paced') >= sent, 300_000);
const sorted = [...lags].sort((a, b) => a - b);
console.log(
  JSON.stringify({
    phase: 'half_rate',
    events_per_s: Math.round(perSecond),
    events: sent,
    lag_p50_ms: percentile(sorted, 50),
    lag_p99_ms: percentile(sorted, 99),
    lag_max_ms: sorted.at(-1),
    bound_ms: SEAL_INTERVAL_MS + 5000,
  }),
);

await Promise.all([stopProcess(streams), stopProcess(ingest), stopProcess(sealerProcess)]);
await removeNamespaceStreams(NATS_URL, NAMESPACE);
await db.close();
receiver.close();
process.exit(0);
