/**
 * The dataset of the list, export and limiter benchmarks (issue 2): 2,000,000 events of 1,000 tenants, one
 * of them (`tenant-big`) holding 500,000, spread over the last 90 days. Generated inside Postgres (one
 * INSERT … SELECT over generate_series per chunk) and kept between runs: a marker row says it is complete.
 * Actions and resource types are skewed like a real trail; `phi.break_glass` is 0.5 % of `tenant-big`.
 */
import pg from 'pg';
import { createDatabaseIfMissing, migrate } from '../../src/db/migrate.ts';
import { EVENT_JSON, EVENT_VALUES } from '../../src/events/eventDocument.ts';
import type { StoredForm } from '../../src/events/storedFormSetting.ts';
import { createLogger } from '../../src/platform/logger.ts';

export const SERVER_URL = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432';
export const LIST_DATABASE_URL = `${SERVER_URL}/audit_bench_list`;
export const BIG_TENANT = 'tenant-big';
const TOTAL_EVENTS = 2_000_000;
export const TENANTS = 1_000;
export const RARE_ACTION = 'phi.break_glass';
// v3: events stored once (migration 026), as the write path stores them; v2 had the columns and the document.
const DATASET = 'list-v3';
const DAYS = 90;

export async function ensureListDataset(log: (line: string) => void): Promise<void> {
  await createDatabaseIfMissing(LIST_DATABASE_URL);
  await migrate(LIST_DATABASE_URL, createLogger('warn'));
  if ((await loadListDataset(log)) === 'stale') {
    // A half-loaded dataset from an interrupted run, or an older version of it, cannot be topped up
    // reliably (and events refuse DELETE): start over in a new database.
    log(`audit_bench_list holds events but not dataset ${DATASET}; recreating it`);
    await recreateDatabase();
    await loadListDataset(log);
  }
}

async function loadListDataset(log: (line: string) => void): Promise<'present' | 'loaded' | 'stale'> {
  const client = new pg.Client({ connectionString: LIST_DATABASE_URL });
  await client.connect();
  try {
    await client.query(
      'CREATE TABLE IF NOT EXISTS bench_datasets (name text PRIMARY KEY, rows bigint NOT NULL, loaded_at timestamptz NOT NULL DEFAULT now())',
    );
    const { rows } = await client.query('SELECT rows FROM bench_datasets WHERE name = $1', [DATASET]);
    if (rows[0]) {
      log(`dataset ${DATASET} present (${rows[0].rows} events)`);
      return 'present';
    }
    const started = Date.now();
    const {
      rows: [{ count }],
    } = await client.query('SELECT count(*) FROM events');
    if (Number(count) > 0) return 'stale';
    for (let day = 0; day <= DAYS + 31; day += 28) {
      await client.query(`SELECT audit_ensure_event_partition(now() - make_interval(days => $1))`, [day]);
    }
    const chunk = 250_000;
    for (let offset = 0; offset < TOTAL_EVENTS; offset += chunk) {
      await insertGeneratedEvents(client, { first: offset, last: offset + chunk - 1, form: 'compact' });
      log(`  loaded ${offset + chunk} events`);
    }
    await client.query('ANALYZE events');
    await client.query('INSERT INTO bench_datasets (name, rows) VALUES ($1, $2)', [DATASET, TOTAL_EVENTS]);
    log(`dataset ${DATASET} loaded in ${((Date.now() - started) / 1000).toFixed(0)} s`);
    return 'loaded';
  } finally {
    await client.end();
  }
}

async function recreateDatabase(): Promise<void> {
  const admin = new pg.Client({ connectionString: `${SERVER_URL}/postgres` });
  await admin.connect();
  try {
    await admin.query('DROP DATABASE IF EXISTS audit_bench_list WITH (FORCE)');
  } finally {
    await admin.end();
  }
  await createDatabaseIfMissing(LIST_DATABASE_URL);
  await migrate(LIST_DATABASE_URL, createLogger('warn'));
}

/**
 * Events numbered first..last of the dataset's generator, inserted in one statement in the given stored form
 * (migration 026): `compact` as the write path stores them now, `full` as releases before it did (the
 * columns and the rendered document), for the compaction benchmark.
 */
export async function insertGeneratedEvents(client: pg.Client, range: { first: number; last: number; form: StoredForm }): Promise<void> {
  const target =
    range.form === 'compact'
      ? `INSERT INTO events (tenant_id, occurred_at, event_id, action, user_id, resource_type, resource_id, phi_involved, document_values,
                             user_role, fields_accessed, source_ip, user_agent, justification, success, details)
         SELECT e.tenant_id, e.occurred_at, e.event_id, e.action, e.user_id, e.resource_type, e.resource_id, e.phi_involved, ${EVENT_VALUES},
                NULL, NULL, NULL, NULL, NULL, NULL, NULL`
      : `INSERT INTO events (tenant_id, occurred_at, event_id, action, user_id, user_role, resource_type, resource_id,
                             fields_accessed, phi_involved, source_ip, user_agent, justification, success, details, document)
         SELECT e.*, ${EVENT_JSON}`;
  await client.query(
    `${target}
     FROM (
     -- OFFSET 0 keeps this a subquery, so gen_random_uuid() runs once per row for the column and the document.
     SELECT tenant AS tenant_id, at AS occurred_at, gen_random_uuid() AS event_id, action,
            'user-' || (n % 5000) AS user_id, (ARRAY['clinician','billing','admin','support'])[1 + n % 4] AS user_role,
            resource AS resource_type, resource || '-' || (n % 100000) AS resource_id,
            CASE WHEN action LIKE 'phi.%' THEN '["diagnosis","medications"]' ELSE '' END AS fields_accessed,
            action LIKE 'phi.%' AS phi_involved, '10.' || (n % 250) || '.' || (n % 200) || '.1' AS source_ip,
            'bench-agent/1.0' AS user_agent, '' AS justification, n % 50 <> 0 AS success, '{"ward":"' || (n % 40) || '"}' AS details
     FROM (
       SELECT n,
              CASE WHEN n % 4 = 0 THEN '${BIG_TENANT}' ELSE 'tenant-' || lpad((n % ${TENANTS - 1})::text, 4, '0') END AS tenant,
              date_trunc('milliseconds', now() - (random() * interval '${DAYS} days')) AS at,
              CASE WHEN n % 200 = 0 THEN '${RARE_ACTION}'
                   ELSE (ARRAY['phi.read','phi.read','phi.read','phi.query','phi.export','auth.login','auth.logout','admin.user.invite','admin.key.create','record.update'])[1 + (n / 7) % 10] END AS action,
              (ARRAY['patient_record','claim','upload','session','user'])[1 + (n / 3) % 5] AS resource
       FROM generate_series($1::bigint, $2::bigint) AS n
     ) AS generated
     OFFSET 0) AS e`,
    [range.first, range.last],
  );
}

/**
 * The list dataset's events once more, each field once as a column, in a table partitioned and indexed like
 * `events` (primary key, event_id, one index per list filter): what the bare baseline server reads, the
 * plainest storage of the same fields (issue 30: the service's compact rows against it). Made once per
 * dataset, from the `event_fields` view.
 */
export async function ensureReferenceEvents(log: (line: string) => void): Promise<void> {
  const client = new pg.Client({ connectionString: LIST_DATABASE_URL });
  await client.connect();
  try {
    const marker = `${DATASET}-reference`;
    if ((await client.query('SELECT 1 FROM bench_datasets WHERE name = $1', [marker])).rows.length > 0) return;
    const started = Date.now();
    await client.query('DROP TABLE IF EXISTS reference_events');
    await client.query(`CREATE TABLE reference_events (
      tenant_id text NOT NULL, occurred_at timestamptz NOT NULL, event_id uuid NOT NULL, action text NOT NULL, user_id text NOT NULL,
      user_role text NOT NULL, resource_type text NOT NULL, resource_id text NOT NULL, fields_accessed text NOT NULL,
      phi_involved boolean NOT NULL, source_ip text NOT NULL, user_agent text NOT NULL, justification text NOT NULL,
      success boolean NOT NULL, details text NOT NULL, PRIMARY KEY (tenant_id, occurred_at, event_id)) PARTITION BY RANGE (occurred_at)`);
    await client.query(`DO $$
      DECLARE p record;
      BEGIN
        FOR p IN SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) AS bound
                   FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'events'::regclass LOOP
          EXECUTE format('CREATE TABLE %I PARTITION OF reference_events %s', 'reference_' || p.relname, p.bound);
        END LOOP;
      END $$`);
    await client.query(`INSERT INTO reference_events
      SELECT tenant_id, occurred_at, event_id, action, user_id, user_role, resource_type, resource_id, fields_accessed, phi_involved,
             source_ip, user_agent, justification, success, details FROM event_fields`);
    await client.query('CREATE INDEX ON reference_events (event_id)');
    for (const column of ['action', 'resource_type', 'phi_involved', 'user_id', 'resource_id']) {
      await client.query(`CREATE INDEX ON reference_events (tenant_id, ${column}, occurred_at, event_id)`);
    }
    await client.query('ANALYZE reference_events');
    await client.query('INSERT INTO bench_datasets (name, rows) SELECT $1, count(*) FROM reference_events', [marker]);
    log(`reference table of ${DATASET} made in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  } finally {
    await client.end();
  }
}
