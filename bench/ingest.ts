/**
 * Ingest benchmark (issues 2 and 30): events/s through the HTTP batch endpoint (batches of 500, 4 concurrent
 * producers) and through JetStream (one event per message on audit.ingest.<tenant>, drained by a fresh
 * process from a stream filled beforehand), against COPY of the same events in the same run (psql \copy from
 * CSV on stdin) into a reference table: each event's fields once as columns, with the primary key and the
 * indexes the API's filters need (event_id; action, resource_type, phi_involved, user_id, resource_id), and
 * nothing else. The service runs as a default `serve` does, every role but the Kubernetes controller (api,
 * ingest, relay, worker, sealer), one process per phase, and each phase writes to a fresh database of its
 * own: on a shared one the second phase wrote into tables and indexes the first had filled, which cost
 * Postgres a sixth more per event for whichever ran second.
 *
 *   node bench/ingest.ts
 *   BENCH_INGEST_PHASES=jetstream node bench/ingest.ts   (the COPY baseline and one phase)
 */
import { spawnSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { BusNames, ensureConsumer, ingestConsumerDefinition } from '../src/bus/jetStreamDefinitions.ts';
import { readDeploymentId } from '../src/db/deploymentIdentity.ts';
import { createDatabaseIfMissing, migrate } from '../src/db/migrate.ts';
import { createLogger } from '../src/platform/logger.ts';
import { SERVER_URL } from './support/listDataset.ts';
import { producerEvent } from './support/producers.ts';
import {
  BENCH_ENCRYPTION_KEY,
  BENCH_INGEST_TOKEN,
  BENCH_PEPPER,
  backendsOf,
  builtCli,
  cpuMeter,
  freePort,
  pidsOfName,
  pidsOfUser,
  startNode,
  stopProcess,
  waitForHttp,
} from './support/processes.ts';
import { removeNamespaceStreams } from '../test/support/natsNamespaces.ts';

// The COPY baseline's database; each phase has its own (phaseDatabase).
const DATABASE_URL = `${SERVER_URL}/audit_bench_ingest`;
const EVENTS = Number(process.env.BENCH_INGEST_EVENTS ?? 100_000);
const BATCH = 500;
const PRODUCERS = 4;
// BENCH_INGEST_PHASES=jetstream runs the COPY baseline and one phase only (http or jetstream): half the time
// when only one path changed.
const PHASES = new Set((process.env.BENCH_INGEST_PHASES ?? 'http,jetstream').split(','));
/** A database made afresh (dropped if a run left it), migrated when the service will use it. */
async function freshDatabase(name: string, migrated: boolean): Promise<pg.Client> {
  const admin = new pg.Client({ connectionString: `${SERVER_URL}/postgres` });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
  const url = `${SERVER_URL}/${name}`;
  await createDatabaseIfMissing(url);
  if (migrated) await migrate(url, createLogger('warn'));
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return client;
}

/**
 * A phase's own database, with the CPU meter of its backends: the machine's Postgres serves others too,
 * whose work the count of every postgres process (postgres_s) includes.
 */
async function phaseDatabase(phase: 'http' | 'jetstream') {
  const name = `audit_bench_ingest_${phase}`;
  const client = await freshDatabase(name, true);
  return {
    name,
    url: `${SERVER_URL}/${name}`,
    client,
    backends: () => backendsOf(SERVER_URL, name),
    count: async () => Number((await client.query('SELECT count(*) FROM events WHERE tenant_id = $1', [phase])).rows[0].count),
  };
}

const db = await freshDatabase('audit_bench_ingest', false);

/** Checkpoints the server has begun (the whole server's: others' writes count too), to report per phase. */
const checkpoints = async () => {
  const { rows } = await db.query<{ started: string }>('SELECT checkpoints_timed + checkpoints_req AS started FROM pg_stat_bgwriter');
  return Number(rows[0]!.started);
};

// Baseline: COPY of the same events, as CSV, through psql, into a table holding each field once.
await db.query(`CREATE TABLE reference_events (
  tenant_id text NOT NULL, occurred_at timestamptz NOT NULL, event_id uuid NOT NULL, action text NOT NULL, user_id text NOT NULL,
  user_role text NOT NULL, resource_type text NOT NULL, resource_id text NOT NULL, fields_accessed text NOT NULL,
  phi_involved boolean NOT NULL, source_ip text NOT NULL, user_agent text NOT NULL, justification text NOT NULL,
  success boolean NOT NULL, details text NOT NULL, PRIMARY KEY (tenant_id, occurred_at, event_id))`);
await db.query('CREATE INDEX ON reference_events (event_id)');
for (const column of ['action', 'resource_type', 'phi_involved', 'user_id', 'resource_id']) {
  await db.query(`CREATE INDEX ON reference_events (tenant_id, ${column}, occurred_at, event_id)`);
}
const csvField = (value: string) => `"${value.replace(/"/g, '""')}"`;
const csv = Array.from({ length: EVENTS }, (_, index) => {
  const event = producerEvent('copy', index);
  return [
    event.tenant_id,
    event.timestamp,
    event.event_id,
    event.action,
    event.user_id,
    event.user_role,
    event.resource_type,
    event.resource_id,
    JSON.stringify(event.fields_accessed),
    'true',
    event.source_ip,
    event.user_agent,
    '',
    'true',
    JSON.stringify(event.details),
  ]
    .map(csvField)
    .join(',');
}).join('\n');
const copyStarted = performance.now();
const copy = spawnSync('psql', [DATABASE_URL, '-X', '-q', '-c', '\\copy reference_events FROM STDIN WITH (FORMAT csv)'], {
  input: csv,
  encoding: 'utf8',
  maxBuffer: 64 * 1024 * 1024,
});
const copySeconds = (performance.now() - copyStarted) / 1000;
if (copy.status !== 0) throw new Error(copy.stderr);
if (Number((await db.query('SELECT count(*) FROM reference_events')).rows[0].count) !== EVENTS) {
  throw new Error('COPY stored a different number of rows');
}

// A default serve (every role but the Kubernetes controller), as the service runs where it runs alone.
const SERVE_ROLES = 'api,ingest,relay,worker,sealer';
const signingKey = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
async function serveEnvironment(databaseUrl: string, natsNamespace: string, port: number): Promise<Record<string, string>> {
  return {
    DATABASE_URL: databaseUrl,
    INGEST_TOKENS: BENCH_INGEST_TOKEN,
    NATS_NAMESPACE: natsNamespace,
    KEY_PEPPER: BENCH_PEPPER,
    SECRET_ENCRYPTION_KEY: BENCH_ENCRYPTION_KEY,
    SEAL_SIGNING_KEY: signingKey,
    HOST: '127.0.0.1',
    PORT: String(await freePort()),
    INTERNAL_PORT: String(port),
    LOG_LEVEL: 'warn',
    NODE_OPTIONS: process.env.BENCH_INGEST_NODE_OPTIONS ?? '',
  };
}
// The run's own JetStream names (the HTTP phase's, and the drain's with `js` appended), removed from the
// machine's NATS when each phase ends.
const namespace = `bench${randomBytes(3).toString('hex')}`;
const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

/** HTTP: 4 producers posting batches of 500 to a default serve until EVENTS are stored. */
async function httpPhase() {
  const database = await phaseDatabase('http');
  const internalPort = await freePort();
  const ingest = startNode(builtCli('serve', '--roles', SERVE_ROLES), await serveEnvironment(database.url, namespace, internalPort));
  await waitForHttp(`http://127.0.0.1:${internalPort}/readyz`);
  const batches = Array.from({ length: EVENTS / BATCH }, (_, batch) =>
    JSON.stringify({ events: Array.from({ length: BATCH }, (_, i) => producerEvent('http', batch * BATCH + i)) }),
  );
  let next = 0;
  const cpuBefore = {
    ingest: cpuMeter(() => [ingest.pid!]),
    postgres: cpuMeter(() => pidsOfUser('postgres')),
    backends: cpuMeter(database.backends),
    driver: process.cpuUsage(),
  };
  const checkpointsBefore = await checkpoints();
  const httpStarted = performance.now();
  await Promise.all(
    Array.from({ length: PRODUCERS }, async () => {
      while (next < batches.length) {
        const body = batches[next++]!;
        const response = await fetch(`http://127.0.0.1:${internalPort}/internal/v1/events`, {
          method: 'POST',
          headers: { authorization: `Bearer ${BENCH_INGEST_TOKEN}`, 'content-type': 'application/json' },
          body,
        });
        if (!response.ok) throw new Error(`ingest answered ${response.status}: ${await response.text()}`);
        await response.arrayBuffer();
      }
    }),
  );
  const httpSeconds = (performance.now() - httpStarted) / 1000;
  const checkpointsDuring = (await checkpoints()) - checkpointsBefore;
  const driverCpu = process.cpuUsage(cpuBefore.driver);
  const cpu = {
    ingest_process_s: seconds(cpuBefore.ingest.elapsed()),
    postgres_s: seconds(cpuBefore.postgres.elapsed()),
    postgres_this_database_s: seconds(cpuBefore.backends.elapsed()),
    driver_s: seconds((driverCpu.user + driverCpu.system) / 1e6),
  };
  if ((await database.count()) !== EVENTS) throw new Error('HTTP ingest stored a different number of rows');
  await stopProcess(ingest);
  await removeNamespaceStreams(NATS_URL, namespace);
  await database.client.end();
  return {
    database: database.name,
    checkpoints_begun: checkpointsDuring,
    cpu,
    seconds: seconds(httpSeconds),
    events_per_s: Math.round(EVENTS / httpSeconds),
    ratio_vs_copy: ratio(EVENTS / httpSeconds),
  };
}

/**
 * JetStream: the messages are published first (the driver's publishing would otherwise be what is
 * measured), then a fresh default serve drains them; the rate runs from the first stored event to the last.
 */
async function jetstreamPhase() {
  const database = await phaseDatabase('jetstream');
  const jsNamespace = `${namespace}js`;
  const nc = await connect({ servers: NATS_URL });
  const names = new BusNames({ namespace: jsNamespace, deploymentId: await readDeploymentId(database.client) });
  await ensureConsumer(await jetstreamManager(nc), ingestConsumerDefinition(names));
  const js = jetstream(nc);
  const subject = names.ingestSubject('jetstream');
  const messages = Array.from({ length: EVENTS }, (_, index) => JSON.stringify(producerEvent('jetstream', index)));
  const publishStarted = performance.now();
  for (let start = 0; start < EVENTS; start += 1000) {
    await Promise.all(messages.slice(start, start + 1000).map((message) => js.publish(subject, message)));
  }
  const publishSeconds = (performance.now() - publishStarted) / 1000;
  await nc.close();
  const consumer = startNode(
    builtCli('serve', '--roles', SERVE_ROLES),
    await serveEnvironment(database.url, jsNamespace, await freePort()),
  );
  // Timed from the first stored event until the consumer has nothing pending or unacknowledged (a message is
  // acknowledged after its commit). Both probes are cheap: counting the stored rows every 20 ms cost Postgres
  // more CPU than the difference being measured.
  const hasStored = async () =>
    (await database.client.query("SELECT EXISTS (SELECT 1 FROM events WHERE tenant_id = 'jetstream') AS found")).rows[0].found as boolean;
  while (!(await hasStored())) await new Promise((resolve) => setTimeout(resolve, 20));
  const firstStoredAt = performance.now();
  const checkpointsBefore = await checkpoints();
  const cpuDrain = {
    ingest: cpuMeter(() => [consumer.pid!]),
    postgres: cpuMeter(() => pidsOfUser('postgres')),
    backends: cpuMeter(database.backends),
    nats: cpuMeter(() => pidsOfName('nats-server')),
  };
  const watcher = await connect({ servers: NATS_URL });
  const watcherJsm = await jetstreamManager(watcher);
  const ingestDefinition = ingestConsumerDefinition(names);
  for (;;) {
    const info = await watcherJsm.consumers.info(ingestDefinition.stream.name, ingestDefinition.consumer.durable_name);
    if (info.num_pending === 0 && info.num_ack_pending === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const jsSeconds = (performance.now() - firstStoredAt) / 1000;
  const checkpointsDuring = (await checkpoints()) - checkpointsBefore;
  const cpu = {
    ingest_process_s: seconds(cpuDrain.ingest.elapsed()),
    postgres_s: seconds(cpuDrain.postgres.elapsed()),
    postgres_this_database_s: seconds(cpuDrain.backends.elapsed()),
    nats_server_s: seconds(cpuDrain.nats.elapsed()),
  };
  await watcher.close();
  await stopProcess(consumer);
  await removeNamespaceStreams(NATS_URL, jsNamespace);
  if ((await database.count()) !== EVENTS) throw new Error('JetStream ingest stored a different number of rows');
  await database.client.end();
  return {
    database: database.name,
    checkpoints_begun: checkpointsDuring,
    cpu,
    events_per_s: Math.round(EVENTS / jsSeconds),
    ratio_vs_copy: ratio(EVENTS / jsSeconds),
    driver_publish_per_s: Math.round(EVENTS / publishSeconds),
  };
}

const copyRate = EVENTS / copySeconds;
const seconds = (value: number) => Number(value.toFixed(2));
const ratio = (eventsPerSecond: number) => Number((eventsPerSecond / copyRate).toFixed(2));

/**
 * Each phase ROUNDS times, in the order ABBA… (http, jetstream, jetstream, http), each round on fresh
 * databases: whatever the machine does meanwhile (a checkpoint, whose full-page writes make the next
 * minutes' writes dearer; another session's work) falls on both phases alike. Single runs of the two phases
 * in one order read 0.56 to 0.98 of each other on a quiet machine; each run reports the checkpoints begun
 * during it.
 */
const ROUNDS = Number(process.env.BENCH_INGEST_ROUNDS ?? 2);
type Phase = 'http' | 'jetstream';
type PhaseRun = Awaited<ReturnType<typeof httpPhase>> | Awaited<ReturnType<typeof jetstreamPhase>>;
const order = (['http', 'jetstream'] as const).filter((phase) => PHASES.has(phase));
const runs: Record<Phase, PhaseRun[]> = { http: [], jetstream: [] };
for (let round = 0; round < ROUNDS; round += 1) {
  for (const phase of round % 2 === 0 ? order : [...order].reverse()) {
    runs[phase].push(phase === 'http' ? await httpPhase() : await jetstreamPhase());
  }
}
/** A phase's runs and their mean rate, or undefined when it did not run. */
function summary(phase: Phase, extra: Record<string, unknown>) {
  const measured = runs[phase];
  if (measured.length === 0) return undefined;
  const rate = measured.reduce((sum, run) => sum + run.events_per_s, 0) / measured.length;
  return { events_per_s: Math.round(rate), ratio_vs_copy: ratio(rate), ...extra, runs: measured };
}
const http = summary('http', { producers: PRODUCERS, batch: BATCH });
const jetstreamResult = summary('jetstream', {});
const lastDatabase = (runs.http.at(-1) ?? runs.jetstream.at(-1))!.database;

// Bytes on disk per event (heap, TOAST, indexes, and the small free-space and visibility maps vacuum gives
// both): the service's events table, every partition, in the last phase's database, against the reference
// table holding the same events.
const stored = new pg.Client({ connectionString: `${SERVER_URL}/${lastDatabase}` });
await stored.connect();
await stored.query('VACUUM ANALYZE events');
const { rows: eventSizes } = await stored.query<{ events_bytes: string; events: string }>(
  `SELECT (SELECT sum(pg_total_relation_size(i.inhrelid)) FROM pg_inherits i WHERE i.inhparent = 'events'::regclass) AS events_bytes,
          (SELECT count(*) FROM events) AS events`,
);
await stored.end();
await db.query('VACUUM ANALYZE reference_events');
const { rows: referenceSizes } = await db.query<{ reference_bytes: string }>(
  `SELECT pg_total_relation_size('reference_events') AS reference_bytes`,
);
const eventBytes = Number(eventSizes[0]!.events_bytes) / Number(eventSizes[0]!.events);
const referenceBytes = Number(referenceSizes[0]!.reference_bytes) / EVENTS;
await db.end();

console.log(
  JSON.stringify(
    {
      benchmark: 'ingest',
      command: 'node bench/ingest.ts',
      events: EVENTS,
      copy_rows_per_s: Math.round(copyRate),
      rounds: ROUNDS,
      http,
      jetstream: jetstreamResult,
      jetstream_vs_http: http && jetstreamResult ? Number((jetstreamResult.events_per_s / http.events_per_s).toFixed(2)) : undefined,
      storage: {
        bytes_per_event: Math.round(eventBytes),
        reference_bytes_per_event: Math.round(referenceBytes),
        ratio_vs_reference: Number((eventBytes / referenceBytes).toFixed(2)),
      },
      roles: SERVE_ROLES,
      goals: { ratio_vs_copy: '>= 0.50', storage_ratio_vs_reference: '<= 1.30' },
    },
    null,
    2,
  ),
);
