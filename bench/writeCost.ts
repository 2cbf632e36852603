/**
 * The cost of each part of a write (issue 30): the write path's statement (events/storeBatch.ts with the
 * webhook fan-out, the writer publishing, as ingestion runs it) in batches of 500 events, on copies of one
 * database that differ from the migrated schema by one part each (support/writeCostSetups.ts). A part's
 * price is the difference in the Postgres backend's own CPU per event between two copies, from
 * /proc/PID/schedstat (nanoseconds on the CPU, which other load on the machine inflates far less than
 * wall time; pg_stat_statements is not loaded on this server).
 *
 * The machine is shared, so the copies are written batch by batch in turn (one batch to each, then the next
 * round of batches, starting at a different copy each time): whatever else runs falls on all of them alike.
 * Each round starts from fresh copies of a template holding 100,000 compact events (indexes with depth, as
 * in service); the first round warms caches and is not counted. Each part is reported with its median over
 * the other rounds and their spread; a part whose spread includes 0 is not resolved. The statements around
 * the INSERT (the partition check, the stored-form read, the publication confirmation) are priced by their
 * own CPU per call.
 *
 *   node bench/writeCost.ts   (BENCH_WRITE_COST_EVENTS=10000 per copy and round, BENCH_WRITE_COST_ROUNDS=7, the first discarded,
 *                              BENCH_WRITE_COST_SEED=100000 events in the template, BENCH_WRITE_COST_SETUPS=all)
 */
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import pg from 'pg';
import { createDatabaseIfMissing, migrate } from '../src/db/migrate.ts';
import { confirmPublished } from '../src/delivery/publicationConfirmations.ts';
import { eventColumnArrays } from '../src/events/eventInsert.ts';
import { ensureEventPartitions, type NewEvent } from '../src/events/eventStore.ts';
import { StoredFormSetting } from '../src/events/storedFormSetting.ts';
import { createLogger } from '../src/platform/logger.ts';
import { SERVER_URL } from './support/listDataset.ts';
import { percentile } from './support/processes.ts';
import { producerNewEvent } from './support/producers.ts';
import { COMPARISONS, SETUPS, type Setup, type SetupName } from './support/writeCostSetups.ts';

const EVENTS = Number(process.env.BENCH_WRITE_COST_EVENTS ?? 10_000);
const ROUNDS = Number(process.env.BENCH_WRITE_COST_ROUNDS ?? 7);
const BATCH = 500;
const SEED_EVENTS = Number(process.env.BENCH_WRITE_COST_SEED ?? 100_000);
const CALLS = 500;
const TEMPLATE = 'audit_bench_write_cost';
const log = (line: string) => console.error(`${new Date().toISOString()} ${line}`);
const quietLog = createLogger('warn');
// BENCH_WRITE_COST_SETUPS narrows a run to some copies (comma-separated names of SETUPS; service always).
const wanted = process.env.BENCH_WRITE_COST_SETUPS?.split(',');
const unknown = wanted?.filter((name) => !(name in SETUPS)) ?? [];
if (unknown.length > 0) throw new Error(`BENCH_WRITE_COST_SETUPS names no setup: ${unknown.join(', ')}`);
const NAMES = (Object.keys(SETUPS) as SetupName[]).filter((name) => name === 'service' || !wanted || wanted.includes(name));
const loadText = () =>
  `load ${loadavg()
    .map((load) => load.toFixed(1))
    .join(' ')}`;

/** Nanoseconds a process has run on a CPU (the scheduler's own count, not clock ticks). */
function cpuNs(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
}

let eventIndex = 0;
const nextEvents = (count: number): NewEvent[] =>
  Array.from({ length: count }, () => producerNewEvent(`tenant-${eventIndex % 100}`, eventIndex++));

function batchParameters(setup: Setup): Array<string | Buffer> {
  const events = nextEvents(BATCH);
  const values = eventColumnArrays(
    events,
    events.map((event) => new Date(event.occurredAtMs).toISOString()),
    setup.form,
  );
  return setup.parameters ? setup.parameters(values) : values;
}

const admin = new pg.Client({ connectionString: `${SERVER_URL}/postgres` });
await admin.connect();
const dropAll = async () => {
  const { rows } = await admin.query(`SELECT datname FROM pg_database WHERE datname LIKE '${TEMPLATE}%'`);
  for (const { datname } of rows) await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(datname)} WITH (FORCE)`);
};

/** The template: migrated, then 100,000 events written by the service's own statement, its seal queue emptied. */
async function createTemplate(): Promise<void> {
  const url = `${SERVER_URL}/${TEMPLATE}`;
  await createDatabaseIfMissing(url);
  await migrate(url, quietLog);
  const seed = new pg.Client({ connectionString: url });
  await seed.connect();
  for (let written = 0; written < SEED_EVENTS; written += BATCH) {
    await seed.query({ name: 'write', text: SETUPS.service.statement, values: batchParameters(SETUPS.service) });
  }
  await seed.query('DELETE FROM seal_queue');
  await seed.query('VACUUM ANALYZE');
  await seed.end();
}

interface Copy {
  readonly name: SetupName;
  readonly setup: Setup;
  readonly db: pg.Client;
  readonly pid: number;
  readonly database: string;
  cpuNs: number;
  wallMs: number;
  confirmCpuNs: number;
  confirmed: number;
}

async function openCopy(name: SetupName, round: number): Promise<Copy> {
  const database = `${TEMPLATE}_${round}_${NAMES.indexOf(name)}`;
  await admin.query(`CREATE DATABASE ${database} TEMPLATE ${TEMPLATE}`);
  const db = new pg.Client({ connectionString: `${SERVER_URL}/${database}` });
  await db.connect();
  const setup: Setup = SETUPS[name];
  if (setup.ddl) await db.query(setup.ddl);
  const pid = Number((await db.query('SELECT pg_backend_pid() AS pid')).rows[0].pid);
  return { name, setup, db, pid, database, cpuNs: 0, wallMs: 0, confirmCpuNs: 0, confirmed: 0 };
}

/** One batch to the copy; with confirmsPublications, its deliveries confirmed in a statement of their own. */
async function writeBatch(copy: Copy, values: Array<string | Buffer>): Promise<void> {
  const before = cpuNs(copy.pid);
  const started = performance.now();
  const { rows } = await copy.db.query({ name: 'write', text: copy.setup.statement, values });
  copy.wallMs += performance.now() - started;
  copy.cpuNs += cpuNs(copy.pid) - before;
  if (!copy.setup.confirmsPublications) return;
  const ids: string[] = rows[0]?.delivery_ids ?? [];
  const confirmBefore = cpuNs(copy.pid);
  await confirmPublished(
    copy.db,
    ids.map((id) => ({ id, attempt: 1, publication: 1 })),
    quietLog,
  );
  copy.confirmCpuNs += cpuNs(copy.pid) - confirmBefore;
  copy.confirmed += ids.length;
}

/** µs of backend CPU per call of a statement the writer runs besides the batch's (timed CALLS times). */
async function perCall(copy: Copy, call: () => Promise<unknown>): Promise<number> {
  await call();
  const before = cpuNs(copy.pid);
  for (let i = 0; i < CALLS; i += 1) await call();
  return (cpuNs(copy.pid) - before) / CALLS / 1000;
}

interface RoundFigures {
  readonly cpuUsPerEvent: Record<SetupName, number>;
  readonly wallUsPerEvent: Record<SetupName, number>;
  readonly statementsUs: Record<string, number>;
}

async function runRound(round: number): Promise<RoundFigures> {
  const copies: Copy[] = [];
  for (const name of NAMES) copies.push(await openCopy(name, round));
  const batches = copies.map((copy) => Array.from({ length: EVENTS / BATCH }, () => batchParameters(copy.setup)));
  for (let batch = 0; batch < EVENTS / BATCH; batch += 1) {
    for (let turn = 0; turn < copies.length; turn += 1) {
      const which = (turn + batch + round) % copies.length;
      await writeBatch(copies[which]!, batches[which]![batch]!);
    }
  }
  const service = copies[0]!;
  const statementsUs: Record<string, number> = {
    'partition check (ensureEventPartitions, one month)': await perCall(service, () => ensureEventPartitions(service.db, [Date.now()])),
    'stored-form read (StoredFormSetting)': await perCall(service, () => new StoredFormSetting(service.db).current()),
  };
  const withDeliveries = copies.find((copy) => copy.setup.confirmsPublications);
  if (withDeliveries) {
    statementsUs['publication confirmation (confirmPublished), per delivery'] =
      withDeliveries.confirmCpuNs / 1000 / withDeliveries.confirmed;
  }
  const figures: RoundFigures = {
    cpuUsPerEvent: Object.fromEntries(copies.map((copy) => [copy.name, copy.cpuNs / 1000 / EVENTS])) as Record<SetupName, number>,
    wallUsPerEvent: Object.fromEntries(copies.map((copy) => [copy.name, (copy.wallMs * 1000) / EVENTS])) as Record<SetupName, number>,
    statementsUs,
  };
  for (const copy of copies) {
    await copy.db.end();
    await admin.query(`DROP DATABASE ${copy.database} WITH (FORCE)`);
  }
  return figures;
}

/** Median and spread of a part's per-round figures; resolved when the whole spread lies on one side of 0. */
function summary(values: readonly number[]) {
  const sorted = [...values].sort((a, b) => a - b);
  const round1 = (value: number) => Number(value.toFixed(2));
  const min = sorted[0]!;
  const max = sorted.at(-1)!;
  return {
    median: round1(percentile(sorted, 50)),
    min: round1(min),
    max: round1(max),
    q1: round1(percentile(sorted, 25)),
    q3: round1(percentile(sorted, 75)),
    resolved: min > 0 || max < 0,
    rounds: values.map(round1),
  };
}

await dropAll();
try {
  log(`template: ${SEED_EVENTS} events (${loadText()})`);
  await createTemplate();
  const counted: RoundFigures[] = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    const figures = await runRound(round);
    if (round > 0) counted.push(figures);
    log(
      `round ${round + 1}${round === 0 ? ' (warm-up, not counted)' : ''}: service ${figures.cpuUsPerEvent.service.toFixed(1)} µs/event ` +
        `(${loadText()})`,
    );
  }
  const service = summary(counted.map((figures) => figures.cpuUsPerEvent.service));
  console.log(
    JSON.stringify(
      {
        benchmark: 'write-cost',
        command: `BENCH_WRITE_COST_EVENTS=${EVENTS} BENCH_WRITE_COST_ROUNDS=${ROUNDS} BENCH_WRITE_COST_SEED=${SEED_EVENTS} ${
          process.env.BENCH_WRITE_COST_SETUPS ? `BENCH_WRITE_COST_SETUPS='${process.env.BENCH_WRITE_COST_SETUPS}' ` : ''
        }node bench/writeCost.ts`,
        // The copies written in turn share the server's buffers: how much of them the indexes miss depends on both.
        copies: NAMES.length,
        template_size: (await admin.query(`SELECT pg_size_pretty(pg_database_size('${TEMPLATE}')) AS size`)).rows[0].size,
        shared_buffers: (await admin.query('SHOW shared_buffers')).rows[0].shared_buffers,
        rounds_counted: counted.length,
        events_per_copy_and_round: EVENTS,
        load_average_at_end: loadavg().map((load) => Number(load.toFixed(2))),
        service_statement_cpu_us_per_event: service,
        service_statement_wall_us_per_event: summary(counted.map((figures) => figures.wallUsPerEvent.service)),
        each_setup_cpu_median_us_per_event: Object.fromEntries(
          NAMES.map((name) => [name, summary(counted.map((figures) => figures.cpuUsPerEvent[name])).median]),
        ),
        parts_cpu_us_per_event: Object.fromEntries(
          COMPARISONS.filter((comparison) => NAMES.includes(comparison.with) && NAMES.includes(comparison.without)).map(
            ({ part, with: withPart, without }) => {
              const cost = summary(counted.map((figures) => figures.cpuUsPerEvent[withPart] - figures.cpuUsPerEvent[without]));
              return [part, { ...cost, share_of_service: Number((cost.median / service.median).toFixed(3)) }];
            },
          ),
        ),
        statements_cpu_us_per_call: Object.fromEntries(
          Object.keys(counted[0]?.statementsUs ?? {}).map((name) => [name, summary(counted.map((figures) => figures.statementsUs[name]!))]),
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
