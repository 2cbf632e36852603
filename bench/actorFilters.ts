/**
 * Actor and resource filters benchmark (issue 30): a page of 100 for one user or one resource among
 * 10,000,000 events of 100 tenants, through the API of a `serve` running every role but the Kubernetes
 * controller (api, ingest, relay, worker, sealer), one request at a time after a warm-up: p50 and p99 for
 * `user_id`, `resource_id`, `resource_id` with `resource_type`, and the second page of a user through its cursor.
 * Each tenant holds 100,000 events over 90 days; each of its 1,000 users and 997 resources about 100.
 *
 * The dataset is generated inside Postgres in the database audit_bench_actor and kept between runs (a marker
 * row says it is complete); about 13 GB. Drop it when done: `DROP DATABASE audit_bench_actor`.
 *
 *   node bench/actorFilters.ts        (BENCH_ACTOR_EVENTS=10000000, BENCH_ACTOR_REQUESTS=1000; BENCH_ACTOR_LOAD_ONLY=1 only loads)
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import pg from 'pg';
import { createDatabaseIfMissing, migrate } from '../src/db/migrate.ts';
import { EVENT_VALUES } from '../src/events/eventDocument.ts';
import { createLogger } from '../src/platform/logger.ts';
import { mintBenchKeys } from './support/keys.ts';
import { SERVER_URL } from './support/listDataset.ts';
import {
  BENCH_ENCRYPTION_KEY,
  BENCH_INGEST_TOKEN,
  BENCH_PEPPER,
  builtCli,
  freePort,
  startNode,
  stopProcess,
  waitForHttp,
} from './support/processes.ts';
import { removeNamespaceStreams } from '../test/support/natsNamespaces.ts';

const EVENTS = Number(process.env.BENCH_ACTOR_EVENTS ?? 10_000_000);
// A smaller dataset (a quick check of the script) gets a database of its own.
const DATABASE_URL = `${SERVER_URL}/audit_bench_actor${EVENTS === 10_000_000 ? '' : `_${EVENTS}`}`;
const TENANTS = 100;
const USERS = 1000;
const RESOURCES = 997;
const REQUESTS = Number(process.env.BENCH_ACTOR_REQUESTS ?? 1000);
const SAMPLE_TENANTS = 20;
// v2: events stored once (migration 026), as the write path stores them; v1 held the columns and the document.
const DATASET = 'actor-v2';
const log = (line: string) => console.error(line);

await createDatabaseIfMissing(DATABASE_URL);
await migrate(DATABASE_URL, createLogger('warn'));
const db = new pg.Client({ connectionString: DATABASE_URL });
await db.connect();
await db.query('CREATE TABLE IF NOT EXISTS bench_datasets (name text PRIMARY KEY, rows bigint NOT NULL)');
if ((await db.query('SELECT 1 FROM bench_datasets WHERE name = $1', [DATASET])).rowCount === 0) {
  if (Number((await db.query('SELECT count(*) FROM (SELECT 1 FROM events LIMIT 1) e')).rows[0].count) > 0) {
    throw new Error(`${DATABASE_URL} holds events of another or an unfinished dataset: drop that database and run again`);
  }
  const started = Date.now();
  // Loaded without the table's indexes, which are then built once each: inserting 10,000,000 rows into ten
  // indexes row by row took this machine hours. (Built in one go, the indexes come out denser than ingestion
  // leaves them: the latencies are a little kinder than a trail grown event by event.)
  const { rows: indexes } = await db.query<{ name: string; definition: string; constraint: boolean }>(
    `SELECT c.relname AS name, pg_get_indexdef(c.oid) AS definition, x.indisprimary AS constraint
       FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid WHERE x.indrelid = 'events'::regclass`,
  );
  for (const index of indexes) {
    await db.query(index.constraint ? `ALTER TABLE events DROP CONSTRAINT ${index.name}` : `DROP INDEX ${index.name}`);
  }
  for (let day = 0; day <= 90 + 31; day += 28)
    await db.query(`SELECT audit_ensure_event_partition(now() - make_interval(days => $1))`, [day]);
  const chunk = Math.min(EVENTS, 500_000);
  for (let offset = 0; offset < EVENTS; offset += chunk) {
    // n % TENANTS picks the tenant; within a tenant, (n / TENANTS) numbers its events, which spreads them over
    // its users and resources evenly.
    await db.query(
      `INSERT INTO events (tenant_id, occurred_at, event_id, action, user_id, resource_type, resource_id, phi_involved, document_values,
                           user_role, fields_accessed, source_ip, user_agent, justification, success, details)
       SELECT e.tenant_id, e.occurred_at, e.event_id, e.action, e.user_id, e.resource_type, e.resource_id, e.phi_involved, ${EVENT_VALUES},
              NULL, NULL, NULL, NULL, NULL, NULL, NULL
       FROM (SELECT 'tenant-' || lpad((n % ${TENANTS})::text, 3, '0') AS tenant_id,
                    date_trunc('milliseconds', now() - (random() * interval '90 days')) AS occurred_at, gen_random_uuid() AS event_id,
                    (ARRAY['phi.read','phi.read','phi.read','phi.query','phi.export','auth.login','record.update'])[1 + (n / 7) % 7] AS action,
                    'user-' || ((n / ${TENANTS}) % ${USERS}) AS user_id, 'clinician' AS user_role,
                    (ARRAY['patient_record','claim','upload','session','user'])[1 + (n / 3) % 5] AS resource_type,
                    'p-' || ((n / ${TENANTS}) % ${RESOURCES}) AS resource_id,
                    '["diagnosis","medications"]' AS fields_accessed, true AS phi_involved, '10.1.2.3' AS source_ip,
                    'bench-agent/1.0' AS user_agent, '' AS justification, true AS success, '{"ward":"' || (n % 40) || '"}' AS details
               FROM generate_series($1::bigint, $2::bigint) AS n
             OFFSET 0) AS e`,
      [offset, offset + chunk - 1],
    );
    log(`  loaded ${offset + chunk} events (${Math.round((Date.now() - started) / 1000)} s)`);
  }
  await db.query(`SET maintenance_work_mem = '512MB'`);
  for (const index of indexes) {
    // pg_get_indexdef writes a partitioned table's index as ON ONLY: here it is built on every month.
    await db.query(
      index.constraint
        ? 'ALTER TABLE events ADD PRIMARY KEY (tenant_id, occurred_at, event_id)'
        : index.definition.replace(' ON ONLY ', ' ON '),
    );
    log(`  built ${index.name} (${Math.round((Date.now() - started) / 1000)} s)`);
  }
  // The load queued its events for sealing; the sealer of the measured serve would spend the run sealing
  // 10,000,000 of them, which is the sealing benchmark's business, not this one's.
  await db.query('DELETE FROM seal_queue');
  await db.query('ANALYZE events');
  await db.query('INSERT INTO bench_datasets (name, rows) VALUES ($1, $2)', [DATASET, EVENTS]);
  log(`dataset ${DATASET} loaded in ${Math.round((Date.now() - started) / 1000)} s`);
}
const { rows: sizeRows } = await db.query(`SELECT pg_size_pretty(sum(pg_total_relation_size(inhrelid))) AS size
  FROM pg_inherits WHERE inhparent = 'events'::regclass`);
await db.end();
// Load now, measure later (on a quieter machine): BENCH_ACTOR_LOAD_ONLY=1 stops here.
if (process.env.BENCH_ACTOR_LOAD_ONLY === '1') {
  log(`dataset ${DATASET} ready (${sizeRows[0].size}); not measured (BENCH_ACTOR_LOAD_ONLY)`);
  process.exit(0);
}

const tenants = Array.from({ length: SAMPLE_TENANTS }, (_, index) => `tenant-${String((index * 37) % TENANTS).padStart(3, '0')}`);
const keys = await mintBenchKeys(DATABASE_URL, tenants, ['audit:read']);
const [port, internalPort] = [await freePort(), await freePort()];
// The run's own JetStream names, removed from the machine's NATS when it ends.
const NAMESPACE = `bench${randomBytes(3).toString('hex')}`;
const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const service = startNode(builtCli('serve', '--roles', 'api,ingest,relay,worker,sealer'), {
  DATABASE_URL,
  KEY_PEPPER: BENCH_PEPPER,
  SECRET_ENCRYPTION_KEY: BENCH_ENCRYPTION_KEY,
  INGEST_TOKENS: BENCH_INGEST_TOKEN,
  NATS_NAMESPACE: NAMESPACE,
  SEAL_SIGNING_KEY: generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  HOST: '127.0.0.1',
  PORT: String(port),
  INTERNAL_PORT: String(internalPort),
  LOG_LEVEL: 'warn',
  RATE_LIMIT_READ_PER_MINUTE: '100000000',
  RATE_LIMIT_KEY_PREFIX: `bench:${randomBytes(4).toString('hex')}`,
});
await waitForHttp(`http://127.0.0.1:${internalPort}/readyz`, 120_000);
const base = `http://127.0.0.1:${port}/api/v2/public/audit/events`;

const pick = <T>(items: readonly T[]) => items[Math.floor(Math.random() * items.length)]!;
const KINDS = {
  user: () => `user_id=user-${Math.floor(Math.random() * USERS)}`,
  resource: () => `resource_id=p-${Math.floor(Math.random() * RESOURCES)}`,
  resource_with_type: () =>
    `resource_type=${pick(['patient_record', 'claim', 'upload', 'session', 'user'])}&resource_id=p-${Math.floor(Math.random() * RESOURCES)}`,
  user_second_page: () => `user_id=user-${Math.floor(Math.random() * USERS)}`,
};
type Kind = keyof typeof KINDS;

async function timedPage(kind: Kind): Promise<{ ms: number; returned: number }> {
  const tenant = pick(tenants);
  const headers = { authorization: `Bearer ${keys.get(tenant)}` };
  let url = `${base}?limit=100&${KINDS[kind]()}`;
  if (kind === 'user_second_page') {
    const first = (await (await fetch(`${url.replace('limit=100', 'limit=50')}`, { headers })).json()) as { page: { next_cursor: string } };
    if (!first.page.next_cursor) throw new Error('a user with fewer than 51 events: the dataset is too small for second pages');
    url = `${url}&cursor=${encodeURIComponent(first.page.next_cursor)}`;
  }
  const started = performance.now();
  const response = await fetch(url, { headers });
  const body = (await response.json()) as { page: { returned: number } };
  const ms = performance.now() - started;
  if (!response.ok) throw new Error(`${url} answered ${response.status}`);
  return { ms, returned: body.page.returned };
}

const results: Record<string, unknown> = {};
for (const kind of Object.keys(KINDS) as Kind[]) {
  for (let warm = 0; warm < 50; warm += 1) await timedPage(kind);
  const samples: number[] = [];
  let returned = 0;
  for (let index = 0; index < REQUESTS; index += 1) {
    const sample = await timedPage(kind);
    samples.push(sample.ms);
    returned += sample.returned;
  }
  samples.sort((a, b) => a - b);
  const at = (q: number) => Number(samples[Math.min(samples.length - 1, Math.floor(samples.length * q))]!.toFixed(1));
  results[kind] = { p50_ms: at(0.5), p99_ms: at(0.99), max_ms: at(1), mean_returned: Math.round(returned / REQUESTS) };
}
await stopProcess(service);
await removeNamespaceStreams(NATS_URL, NAMESPACE);

console.log(
  JSON.stringify(
    {
      benchmark: 'actor-filters',
      command: 'node bench/actorFilters.ts',
      dataset: `${EVENTS} events, ${TENANTS} tenants, ${USERS} users and ${RESOURCES} resources each (events partitions: ${sizeRows[0].size})`,
      roles: 'api,ingest,relay,worker,sealer',
      requests_per_kind: REQUESTS,
      pages: results,
      goals: { p99_ms: '< 50' },
    },
    null,
    2,
  ),
);
