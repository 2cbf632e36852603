/**
 * The cost of each part of a write (issue 30): the write path's statement (events/storeBatch.ts with the
 * webhook fan-out, as ingestion runs it) over batches of 500 events, on databases that differ from the
 * migrated schema by one part each: one index of `events` dropped, the sealing trigger dropped, the fan-out
 * left out of the statement, the stored document or the leaf hash not sent. A part's cost is the difference
 * from the full statement, in Postgres CPU per event (the backend's own user + system time from /proc, which
 * other load on the machine inflates far less than wall time) and in wall time per event in one session.
 *
 * Each database is a copy of a template holding 100,000 events already (the indexes have depth, as in
 * service), so every variant starts alike; variants are interleaved round by round. The template and the
 * copies are dropped at the end.
 *
 *   node bench/writeCost.ts           (BENCH_WRITE_COST_EVENTS=20000 per variant and round, BENCH_WRITE_COST_ROUNDS=3)
 */
import { producerNewEvent } from './support/producers.ts';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { createDatabaseIfMissing, migrate } from '../src/db/migrate.ts';
import { WEBHOOK_FAN_OUT } from '../src/delivery/fanOut.ts';
import { EVENT_JSON } from '../src/events/eventDocument.ts';
import { eventColumnArrays, INSERT_EVENTS } from '../src/events/eventInsert.ts';
import type { NewEvent } from '../src/events/eventStore.ts';
import type { StoredForm } from '../src/events/storedFormSetting.ts';
import { createLogger } from '../src/platform/logger.ts';
import { SERVER_URL } from './support/listDataset.ts';

const EVENTS = Number(process.env.BENCH_WRITE_COST_EVENTS ?? 20_000);
const ROUNDS = Number(process.env.BENCH_WRITE_COST_ROUNDS ?? 3);
const BATCH = 500;
const TEMPLATE = 'audit_bench_write_cost';
const log = (line: string) => console.error(line);

/** The write path's statement as BatchStatements builds it, the writer publishing (ingestion's default). */
const writeStatement = (
  form: StoredForm,
) => `WITH stored AS (${INSERT_EVENTS[form]}), ${WEBHOOK_FAN_OUT.clauses('stored', '$1::text[]', 'writer')}
  SELECT tenant_id, event_id, (extract(epoch FROM occurred_at) * 1000)::int8 AS occurred_at_ms, ${WEBHOOK_FAN_OUT.selected('writer')}
  FROM stored`;
const FULL = writeStatement('compact');
const WITHOUT_FAN_OUT = `WITH stored AS (${INSERT_EVENTS.compact})
  SELECT tenant_id, event_id, (extract(epoch FROM occurred_at) * 1000)::int8 AS occurred_at_ms FROM stored`;

interface Variant {
  readonly ddl?: string;
  readonly statement?: string;
  /** The form the parameters are built for: compact unless said (the form of earlier releases, `full`, to compare). */
  readonly form?: StoredForm;
  /** Changes the statement's parameters (eventColumnArrays) before they are sent. */
  readonly parameters?: (values: Array<string | Buffer>) => Array<string | Buffer>;
}
const dropIndex = (name: string): Variant => ({ ddl: `DROP INDEX ${name}` });
const VARIANTS: Record<string, Variant> = {
  full: {},
  'index events_event_id': dropIndex('events_event_id'),
  'index events_by_action': dropIndex('events_by_action'),
  'index events_by_resource_type': dropIndex('events_by_resource_type'),
  'index events_by_phi': dropIndex('events_by_phi'),
  'index events_by_user': dropIndex('events_by_user'),
  'index events_by_resource': dropIndex('events_by_resource'),
  'trigger events_enqueue_for_sealing': { ddl: 'DROP TRIGGER events_enqueue_for_sealing ON events' },
  'fan-out clauses (no endpoint)': { statement: WITHOUT_FAN_OUT },
  // No values: an empty list makes every row's document_values NULL.
  'document values': { parameters: (values) => values.map((value, index) => (index === 8 ? '' : value)) },
  // No leaf hashes: an empty bytea, so each row stores an empty one instead of 32 bytes.
  'leaf hash': { parameters: (values) => values.map((value, index) => (index === 9 ? Buffer.alloc(0) : value)) },
  // The form of releases before migration 026: every field as a column and the rendered document. Its
  // difference from `full` is the price of storing each event twice (a negative "saves").
  'compact form (against the columns and the document)': { form: 'full', statement: writeStatement('full') },
};

const admin = new pg.Client({ connectionString: `${SERVER_URL}/postgres` });
await admin.connect();
const dropAll = async () => {
  const { rows } = await admin.query(`SELECT datname FROM pg_database WHERE datname LIKE '${TEMPLATE}%'`);
  for (const { datname } of rows) await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(datname)} WITH (FORCE)`);
};
await dropAll();

const producer = (index: number): NewEvent => producerNewEvent(`tenant-${index % 100}`, index);

/** User + system CPU of a process, in microseconds (/proc/PID/stat, clock ticks of 10 ms). */
function cpuUs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

try {
  const templateUrl = `${SERVER_URL}/${TEMPLATE}`;
  await createDatabaseIfMissing(templateUrl);
  await migrate(templateUrl, createLogger('warn'));
  const seed = new pg.Client({ connectionString: templateUrl });
  await seed.connect();
  await seed.query(`INSERT INTO events (tenant_id, occurred_at, event_id, action, user_id, user_role, resource_type, resource_id,
                                        fields_accessed, phi_involved, source_ip, user_agent, justification, success, details, document)
    SELECT e.*, ${EVENT_JSON} FROM (
      SELECT 'tenant-' || (n % 100) AS tenant_id, date_trunc('milliseconds', now() - n * interval '1 ms') AS occurred_at, gen_random_uuid() AS event_id,
             'phi.read' AS action, 'user-' || (n % 500) AS user_id, 'clinician' AS user_role, 'patient_record' AS resource_type, 'p-' || n AS resource_id,
             '["diagnosis","medications"]' AS fields_accessed, true AS phi_involved, '10.1.2.3' AS source_ip, 'bench-producer/1.0' AS user_agent,
             '' AS justification, true AS success, '{"ward":"1"}' AS details
        FROM generate_series(1, 100000) AS n OFFSET 0) AS e`);
  await seed.query('DELETE FROM seal_queue');
  await seed.query('VACUUM ANALYZE');
  await seed.end();

  const totals: Record<string, { cpuUs: number; wallUs: number; events: number }> = {};
  let index = 0;
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const [name, variant] of Object.entries(VARIANTS)) {
      const database = `${TEMPLATE}_${round}_${Object.keys(VARIANTS).indexOf(name)}`;
      await admin.query(`CREATE DATABASE ${database} TEMPLATE ${TEMPLATE}`);
      const db = new pg.Client({ connectionString: `${SERVER_URL}/${database}` });
      await db.connect();
      if (variant.ddl) await db.query(variant.ddl);
      const backend = Number((await db.query('SELECT pg_backend_pid() AS pid')).rows[0].pid);
      const batches = Array.from({ length: EVENTS / BATCH }, () => {
        const events = Array.from({ length: BATCH }, () => producer(index++));
        const values = eventColumnArrays(
          events,
          events.map((event) => new Date(event.occurredAtMs).toISOString()),
          variant.form ?? 'compact',
        );
        return variant.parameters ? variant.parameters(values) : values;
      });
      const cpuBefore = cpuUs(backend);
      const started = performance.now();
      for (const values of batches) await db.query({ name: 'write', text: variant.statement ?? FULL, values });
      const wallUs = (performance.now() - started) * 1000;
      totals[name] ??= { cpuUs: 0, wallUs: 0, events: 0 };
      const total = totals[name];
      total.cpuUs += cpuUs(backend) - cpuBefore;
      total.wallUs += wallUs;
      total.events += EVENTS;
      await db.end();
      await admin.query(`DROP DATABASE ${database} WITH (FORCE)`);
      log(`round ${round + 1}: ${name}`);
    }
  }
  const perEvent = Object.fromEntries(
    Object.entries(totals).map(([name, total]) => [name, { cpu: total.cpuUs / total.events, wall: total.wallUs / total.events }]),
  );
  const full = perEvent.full!;
  console.log(
    JSON.stringify(
      {
        benchmark: 'write-cost',
        command: 'node bench/writeCost.ts',
        events_per_variant: EVENTS * ROUNDS,
        full_statement_us_per_event: { postgres_cpu: Number(full.cpu.toFixed(1)), wall_one_session: Number(full.wall.toFixed(1)) },
        cost_of_each_part_us_per_event: Object.fromEntries(
          Object.entries(perEvent)
            .filter(([name]) => name !== 'full')
            .map(([name, cost]) => [
              name,
              { postgres_cpu: Number((full.cpu - cost.cpu).toFixed(1)), wall_one_session: Number((full.wall - cost.wall).toFixed(1)) },
            ]),
        ),
      },
      null,
      2,
    ),
  );
} finally {
  await dropAll();
  await admin.end();
}
