/**
 * Compaction benchmark (issue 30): an existing deployment's 1,000,000 events, stored in the full form of
 * releases before migration 026 (every field as a column and the rendered document), are rewritten into the
 * compact form by `audit-trail events compact` (the built CLI) while the service ingests over HTTP and serves
 * list pages at a steady rate. Reported: the rewrite's rows/s, ingest and list latency and failures before,
 * during and after it (the same load, measured in the same run), and whether every event serves the same
 * bytes afterwards (a hash of every served document, before and after). The command's progress lines go to
 * stderr as it prints them.
 *
 *   node bench/compaction.ts          (node bench/run.ts compaction)
 *
 * BENCH_COMPACTION_EVENTS (1,000,000) events from the list benchmark's generator; ingest BENCH_INGEST_RATE
 * (10) batches of 100 a second; BENCH_LIST_RATE (20) list pages of 100 a second; BENCH_PHASE_S (20) seconds
 * for the phases before and after.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import pg from 'pg';
import { EVENT_DOCUMENT } from '../src/events/eventStore.ts';
import { createLogger } from '../src/platform/logger.ts';
import { mintBenchKeys } from './support/keys.ts';
import { BIG_TENANT, insertGeneratedEvents, SERVER_URL } from './support/listDataset.ts';
import {
  BENCH_ENCRYPTION_KEY,
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
import { producerEvent } from './support/producers.ts';
import { removeNamespaceStreams } from '../test/support/natsNamespaces.ts';

const NAME = 'audit_bench_compaction';
const DATABASE_URL = `${SERVER_URL}/${NAME}`;
const EVENTS = Number(process.env.BENCH_COMPACTION_EVENTS ?? 1_000_000);
const INGEST_RATE = Number(process.env.BENCH_INGEST_RATE ?? 10);
const LIST_RATE = Number(process.env.BENCH_LIST_RATE ?? 20);
const PHASE_S = Number(process.env.BENCH_PHASE_S ?? 20);
const log = (line: string) => console.error(line);

await freshDatabase(SERVER_URL, NAME, createLogger('warn'));
const db = new pg.Client({ connectionString: DATABASE_URL });
await db.connect();
// A database upgraded from a release before 026: it held events, so writers keep the full form until compaction.
await db.query(`UPDATE event_storage SET form = 'full'`);
for (let day = 0; day <= 121; day += 28) await db.query('SELECT audit_ensure_event_partition(now() - make_interval(days => $1))', [day]);
const loadStarted = performance.now();
for (let first = 0; first < EVENTS; first += 250_000) {
  await insertGeneratedEvents(db, { first, last: Math.min(EVENTS, first + 250_000) - 1, form: 'full' });
  log(`loaded ${Math.min(EVENTS, first + 250_000)} full-form events`);
}
await db.query('VACUUM ANALYZE events');
log(`loaded in ${((performance.now() - loadStarted) / 1000).toFixed(0)} s`);

/** Every event's served document, hashed and summed: equal before and after if and only if (barring collisions) nothing served changed. */
const servedDigest = async (): Promise<string> =>
  (
    await db.query(
      `SELECT count(*) || ':' || sum(hashtextextended(${EVENT_DOCUMENT}, 0)) AS digest FROM events e WHERE tenant_id <> 'ingest'`,
    )
  ).rows[0].digest;
const eventsBytes = async (): Promise<number> =>
  Number(
    (await db.query(`SELECT sum(pg_total_relation_size(inhrelid)) AS bytes FROM pg_inherits WHERE inhparent = 'events'::regclass`)).rows[0]
      .bytes,
  );
// The key's admin event is written before the digest is taken, so that both digests cover the same events.
const keys = await mintBenchKeys(DATABASE_URL, [BIG_TENANT], ['audit:read']);
const digestBefore = await servedDigest();
const bytesBefore = await eventsBytes();

const [port, internalPort] = [await freePort(), await freePort()];
// The run's own JetStream names, removed from the machine's NATS when it ends.
const NAMESPACE = `bench${randomBytes(3).toString('hex')}`;
const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const environment = {
  DATABASE_URL,
  KEY_PEPPER: BENCH_PEPPER,
  SECRET_ENCRYPTION_KEY: BENCH_ENCRYPTION_KEY,
  INGEST_TOKENS: BENCH_INGEST_TOKEN,
  NATS_NAMESPACE: NAMESPACE,
  HOST: '127.0.0.1',
  PORT: String(port),
  INTERNAL_PORT: String(internalPort),
  LOG_LEVEL: 'warn',
  RATE_LIMIT_READ_PER_MINUTE: '100000000',
  RATE_LIMIT_KEY_PREFIX: `bench:${randomBytes(4).toString('hex')}`,
};
const service = startNode(builtCli('serve', '--roles', 'api,ingest'), environment);
await waitForHttp(`http://127.0.0.1:${internalPort}/readyz`);

interface Paced {
  readonly latencies: number[];
  failures: number;
}

/** Requests every 1000/rate ms until `until` settles, each timed from when it was due. */
async function paced(rate: number, until: Promise<unknown>, request: () => Promise<Response>): Promise<Paced> {
  const result: Paced = { latencies: [], failures: 0 };
  let done = false;
  const stop = () => {
    done = true;
  };
  // Settling either way ends the load; a rejection is the caller's to see, who awaits `until` itself.
  until.then(stop, stop);
  const inFlight = new Set<Promise<void>>();
  const started = performance.now();
  for (let sent = 0; !done; sent += 1) {
    const due = started + (sent * 1000) / rate;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - performance.now())));
    const call: Promise<void> = request()
      .then(async (response) => {
        await response.arrayBuffer();
        if (response.ok) result.latencies.push(performance.now() - due);
        else result.failures += 1;
      })
      .catch(() => {
        result.failures += 1;
      })
      .finally(() => inFlight.delete(call));
    inFlight.add(call);
  }
  await Promise.all(inFlight);
  return result;
}

let ingested = 0;
const ingest = () =>
  fetch(`http://127.0.0.1:${internalPort}/internal/v1/events`, {
    method: 'POST',
    headers: { authorization: `Bearer ${BENCH_INGEST_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ events: Array.from({ length: 100 }, () => producerEvent('ingest', ingested++)) }),
  });
const list = () =>
  fetch(`http://127.0.0.1:${port}/api/v2/public/audit/events?limit=100&user_id=user-${Math.floor(Math.random() * 5000)}`, {
    headers: { authorization: `Bearer ${keys.get(BIG_TENANT)}` },
  });

async function phase(until: Promise<unknown>) {
  const [ingestLoad, listLoad] = await Promise.all([paced(INGEST_RATE, until, ingest), paced(LIST_RATE, until, list)]);
  const summary = (load: Paced) => {
    const sorted = load.latencies.sort((a, b) => a - b);
    return {
      requests: sorted.length + load.failures,
      failures: load.failures,
      p50_ms: Number(percentile(sorted, 50).toFixed(1)),
      p99_ms: Number(percentile(sorted, 99).toFixed(1)),
    };
  };
  return { ingest: summary(ingestLoad), list: summary(listLoad) };
}

const sleep = (seconds: number) => new Promise((resolve) => setTimeout(resolve, seconds * 1000));
const before = await phase(sleep(PHASE_S));
const compactStarted = performance.now();
const compaction = startNode(builtCli('events', 'compact'), environment);
const exited = once(compaction, 'exit');
const during = await phase(exited);
const [code] = await exited;
const compactSeconds = (performance.now() - compactStarted) / 1000;
const after = await phase(sleep(PHASE_S));
await stopProcess(service);
await removeNamespaceStreams(NATS_URL, NAMESPACE);

const digestAfter = await servedDigest();
const bytesAfter = await eventsBytes();
const forms = (
  await db.query(
    `SELECT CASE WHEN document_values IS NOT NULL THEN 'compact' WHEN document IS NOT NULL THEN 'document' ELSE 'columns' END AS form,
            count(*)::int AS n FROM events GROUP BY 1 ORDER BY 1`,
  )
).rows;
await db.end();

console.log(
  JSON.stringify(
    {
      benchmark: 'compaction',
      command: 'node bench/compaction.ts',
      events: EVENTS,
      exit_code: code,
      compaction_seconds: Number(compactSeconds.toFixed(1)),
      rows_per_s: Math.round(EVENTS / compactSeconds),
      served_unchanged: digestBefore === digestAfter,
      forms_after: Object.fromEntries(forms.map((row: { form: string; n: number }) => [row.form, row.n])),
      events_bytes: { before: bytesBefore, after: bytesAfter },
      load: { ingest_events_per_s: INGEST_RATE * 100, list_pages_per_s: LIST_RATE, before, during, after },
    },
    null,
    2,
  ),
);
