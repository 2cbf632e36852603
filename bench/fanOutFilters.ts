/**
 * Payload filters at fan-out (issue 46): the write path's statement (events/storeBatch.ts with the webhook
 * fan-out, as the relays publish) for events of a tenant with 1,000 active endpoints, three ways:
 *
 *   plain       1,000 endpoints with an action filter only: every event becomes 1,000 deliveries;
 *   filtered    the same endpoints, each with a payload filter (details.ward in [...], resource.type equals)
 *               that every event meets: as many deliveries, so the difference is the filters' own cost;
 *   selective   each endpoint's filter names one of ten wards: an event becomes 100 deliveries.
 *
 * The goal: `filtered` at least 0.8 of `plain`'s rate (events/s). The figure is the Postgres backend's own CPU
 * per event (/proc/PID/schedstat: what other load on the machine inflates least), with wall time beside it.
 * The three run batch by batch in turn, each round starting at another, so load falls on all alike; the
 * deliveries are emptied between rounds and the first round (caches, plans) is not counted.
 *
 *   node bench/fanOutFilters.ts   (BENCH_FAN_OUT_EVENTS=100 per setup and round, BENCH_FAN_OUT_ROUNDS=6, BENCH_FAN_OUT_BATCH=10)
 */
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import pg from 'pg';
import { WEBHOOK_FAN_OUT } from '../src/delivery/fanOut.ts';
import { ensureEventPartitions, type NewEvent } from '../src/events/eventStore.ts';
import { BatchStatements } from '../src/events/storeBatch.ts';
import { createLogger } from '../src/platform/logger.ts';
import { compilePayloadFilter, type PayloadFilter } from '../src/webhooks/payloadFilter.ts';
import { newEvent } from '../test/support/newEvents.ts';
import { freshDatabase, percentile } from './support/processes.ts';

const SERVER = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432';
const DATABASE = 'audit_bench_fan_out_filters';
const EVENTS = Number(process.env.BENCH_FAN_OUT_EVENTS ?? 100);
const ROUNDS = Number(process.env.BENCH_FAN_OUT_ROUNDS ?? 6);
const BATCH = Number(process.env.BENCH_FAN_OUT_BATCH ?? 10);
const ENDPOINTS = 1_000;
const WARDS = 10;
const log = createLogger('warn');

type SetupName = 'plain' | 'filtered' | 'selective';
const SETUPS: Record<SetupName, (endpoint: number) => PayloadFilter | null> = {
  plain: () => null,
  filtered: () => ({
    all: [
      { path: 'details.ward', in: Array.from({ length: WARDS }, (_, ward) => `W${ward}`) },
      { path: 'resource.type', equals: 'patient_record' },
    ],
  }),
  selective: (endpoint) => ({
    all: [
      { path: 'details.ward', equals: `W${endpoint % WARDS}` },
      { path: 'resource.type', equals: 'patient_record' },
    ],
  }),
};
const NAMES = Object.keys(SETUPS) as SetupName[];

function cpuNs(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
}

/** The tenant's 1,000 endpoints, each with its filter compiled as the registry compiles it. */
async function insertEndpoints(db: pg.Client, tenantId: string, filterOf: (endpoint: number) => PayloadFilter | null): Promise<void> {
  const filters = Array.from({ length: ENDPOINTS }, (_, endpoint) => filterOf(endpoint));
  await db.query(
    `INSERT INTO webhook_endpoints (id, tenant_id, url, event_filter, secret_ciphertext, payload_filter, payload_filter_path)
     SELECT 'wh_' || md5($1 || n), $1, 'https://hooks.example.com/' || n, '{phi.}', '\\x00', f.filter, f.path::jsonpath
     FROM unnest($2::jsonb[], $3::text[]) WITH ORDINALITY AS f(filter, path, n)`,
    [
      tenantId,
      filters.map((filter) => (filter ? JSON.stringify(filter) : null)),
      filters.map((filter) => (filter ? compilePayloadFilter(filter) : null)),
    ],
  );
}

let sequence = 0;
function batchOf(tenantId: string): NewEvent[] {
  return Array.from({ length: BATCH }, () => {
    sequence += 1;
    return newEvent({
      tenantId,
      resourceType: 'patient_record',
      details: JSON.stringify({ ward: `W${sequence % WARDS}`, reason: 'bench' }),
    });
  });
}

async function main(): Promise<void> {
  await freshDatabase(SERVER, DATABASE, log);
  const db = new pg.Client({ connectionString: `${SERVER}/${DATABASE}` });
  await db.connect();
  for (const name of NAMES) await insertEndpoints(db, `tenant-${name}`, SETUPS[name]);
  await db.query('ANALYZE');
  await ensureEventPartitions(db, [Date.now()]);
  const statements = new BatchStatements(WEBHOOK_FAN_OUT);
  const pid = Number((await db.query('SELECT pg_backend_pid() AS pid')).rows[0].pid);

  const perEvent: Record<SetupName, { cpuUs: number[]; wallUs: number[]; deliveries: number }> = {
    plain: { cpuUs: [], wallUs: [], deliveries: 0 },
    filtered: { cpuUs: [], wallUs: [], deliveries: 0 },
    selective: { cpuUs: [], wallUs: [], deliveries: 0 },
  };
  for (let round = 0; round < ROUNDS; round += 1) {
    const spent = Object.fromEntries(NAMES.map((name) => [name, { cpuNs: 0, wallMs: 0 }])) as Record<
      SetupName,
      { cpuNs: number; wallMs: number }
    >;
    for (let batch = 0; batch < EVENTS / BATCH; batch += 1) {
      for (let turn = 0; turn < NAMES.length; turn += 1) {
        const name = NAMES[(turn + round + batch) % NAMES.length]!;
        const events = batchOf(`tenant-${name}`);
        const timestamps = events.map((event) => new Date(event.occurredAtMs).toISOString());
        const before = cpuNs(pid);
        const started = performance.now();
        await statements.store(db, { events, timestamps, form: 'compact' }, 'relay');
        spent[name].wallMs += performance.now() - started;
        spent[name].cpuNs += cpuNs(pid) - before;
      }
    }
    const { rows } = await db.query(`SELECT tenant_id, count(*)::int AS n FROM deliveries GROUP BY tenant_id`);
    await db.query('TRUNCATE deliveries');
    if (round === 0) continue;
    for (const name of NAMES) {
      perEvent[name].cpuUs.push(spent[name].cpuNs / 1000 / EVENTS);
      perEvent[name].wallUs.push((spent[name].wallMs * 1000) / EVENTS);
      perEvent[name].deliveries = rows.find((row) => row.tenant_id === `tenant-${name}`)?.n ?? 0;
    }
    console.error(`${new Date().toISOString()} round ${round} done, load ${loadavg()[0]!.toFixed(1)}`);
  }
  await db.end();

  const median = (values: number[]) =>
    percentile(
      [...values].sort((a, b) => a - b),
      50,
    );
  const figures = Object.fromEntries(
    NAMES.map((name) => [
      name,
      {
        deliveries_per_event: perEvent[name].deliveries / EVENTS,
        backend_cpu_us_per_event: Math.round(median(perEvent[name].cpuUs)),
        wall_us_per_event: Math.round(median(perEvent[name].wallUs)),
      },
    ]),
  ) as unknown as Record<SetupName, { backend_cpu_us_per_event: number; wall_us_per_event: number }>;
  const rateRatio = (name: SetupName, by: 'backend_cpu_us_per_event' | 'wall_us_per_event') =>
    Number((figures.plain[by] / figures[name][by]).toFixed(2));
  console.log(
    JSON.stringify(
      {
        benchmark: 'payload filters at fan-out, 1,000 endpoints of one tenant',
        command: 'node bench/fanOutFilters.ts',
        events_per_setup_and_round: EVENTS,
        batch: BATCH,
        counted_rounds: ROUNDS - 1,
        setups: figures,
        filtered_rate_vs_plain: {
          by_backend_cpu: rateRatio('filtered', 'backend_cpu_us_per_event'),
          by_wall: rateRatio('filtered', 'wall_us_per_event'),
        },
        selective_rate_vs_plain: {
          by_backend_cpu: rateRatio('selective', 'backend_cpu_us_per_event'),
          by_wall: rateRatio('selective', 'wall_us_per_event'),
        },
        goal: { filtered_rate_vs_plain: '>= 0.8' },
        load_average: loadavg().map((load) => Number(load.toFixed(1))),
      },
      null,
      2,
    ),
  );
}

await main();
