/**
 * Expiry benchmark (issue 31): one tenant's EXPIRED events (1,000,000) among 10 tenants expire in bounded
 * batches (RETENTION_BATCH_SIZE 5,000, one transaction each) while producers ingest at a steady rate over
 * HTTP; the ingest latency's p99 with expiry running, against the same load without it measured in the same
 * run (before and after), should stay within 2×.
 *
 *   node bench/expiry.ts            (node bench/run.ts expiry)
 *
 * The ingest role runs as the image runs it (the built CLI, `serve --roles ingest`). Producers post batches
 * of BENCH_BATCH (100) events at BENCH_RATE batches a second (20: 2,000 events/s by default; this script does
 * not measure the peak itself: set BENCH_RATE to half of the peak `node bench/ingest.ts` gives on your machine).
 * The expired tenant's events are seeded 40 days back through the write path, with a 30-day policy; nine
 * other tenants hold BENCH_OTHERS (20,000) events each, kept (no policy). BENCH_PHASE_S (30) seconds per
 * baseline phase; the expiry phase lasts as long as the expiry does.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import { Pool } from 'undici';
import { parseRetentionPeriod } from '../src/config/valueFormats.ts';
import { Database } from '../src/db/database.ts';
import { createDatabaseIfMissing, migrate } from '../src/db/migrate.ts';
import { WEBHOOK_FAN_OUT } from '../src/delivery/fanOut.ts';
import { EventWriter } from '../src/events/eventWriter.ts';
import type { NewEvent } from '../src/events/eventStore.ts';
import { Expiry } from '../src/lifecycle/expiry.ts';
import { RetentionPolicies } from '../src/lifecycle/retentionPolicies.ts';
import { createLogger } from '../src/platform/logger.ts';
import { SERVER_URL } from './support/listDataset.ts';
import { producerEvent } from './support/producers.ts';
import { BENCH_INGEST_TOKEN, BENCH_PEPPER, builtCli, freePort, startNode, stopProcess, waitForHttp } from './support/processes.ts';

const DATABASE_URL = `${SERVER_URL}/audit_bench_expiry`;
const EXPIRED = Number(process.env.BENCH_EXPIRED ?? 1_000_000);
const OTHERS = Number(process.env.BENCH_OTHERS ?? 20_000);
const RATE = Number(process.env.BENCH_RATE ?? 20);
const BATCH = Number(process.env.BENCH_BATCH ?? 100);
const PHASE_S = Number(process.env.BENCH_PHASE_S ?? 30);
const DAY = 86_400_000;
const log = createLogger('warn');

const admin = new pg.Client({ connectionString: `${SERVER_URL}/postgres` });
await admin.connect();
await admin.query('DROP DATABASE IF EXISTS audit_bench_expiry WITH (FORCE)');
await admin.end();
await createDatabaseIfMissing(DATABASE_URL);
await migrate(DATABASE_URL, log);
const db = new Database({ url: DATABASE_URL, poolSize: 4, applicationName: 'bench expiry', log });
const writer = new EventWriter(db, WEBHOOK_FAN_OUT);

function storedEvent(tenantId: string, occurredAtMs: number, index: number): NewEvent {
  return {
    tenantId,
    occurredAtMs,
    eventId: randomUUID(),
    action: index % 3 === 0 ? 'phi.read' : 'phi.query',
    userId: `user-${index % 500}`,
    userRole: 'clinician',
    resourceType: 'patient_record',
    resourceId: `p-${index}`,
    fieldsAccessed: '["diagnosis"]',
    phiInvolved: true,
    sourceIp: '10.1.2.3',
    userAgent: 'bench/1.0',
    justification: '',
    success: true,
    details: '{"ward":"3"}',
  };
}

// The expired tenant's events over 10 days around 40 days back; the others' over the last 10 days.
const seedStarted = performance.now();
const old = Date.now() - 45 * DAY;
for (let start = 0; start < EXPIRED; start += 1000) {
  const events = Array.from({ length: Math.min(1000, EXPIRED - start) }, (_, i) =>
    storedEvent('tenant-expired', old + Math.floor(((start + i) / EXPIRED) * 10 * DAY), start + i),
  );
  await writer.write(events, 'bench');
}
for (let tenant = 1; tenant <= 9; tenant += 1) {
  for (let start = 0; start < OTHERS; start += 1000) {
    const events = Array.from({ length: 1000 }, (_, i) =>
      storedEvent(`tenant-${tenant}`, Date.now() - 10 * DAY + (start + i) * 1000, start + i),
    );
    await writer.write(events, 'bench');
  }
}
console.log(
  `seeded ${EXPIRED} expired events of one tenant and ${9 * OTHERS} kept events of nine in ${((performance.now() - seedStarted) / 1000).toFixed(0)} s`,
);

const policies = new RetentionPolicies({ db, writer, defaultPeriod: undefined });
await policies.declare({ tenantId: 'tenant-expired', period: parseRetentionPeriod('30d')!, locked: false, archive: null }, 'bench', {
  userId: 'bench',
  userRole: 'operator',
});

const internalPort = await freePort();
const ingest = startNode(builtCli('serve', '--roles', 'ingest'), {
  DATABASE_URL,
  INGEST_TOKENS: BENCH_INGEST_TOKEN,
  NATS_NAMESPACE: `bench${randomBytes(3).toString('hex')}`,
  KEY_PEPPER: BENCH_PEPPER,
  HOST: '127.0.0.1',
  PORT: String(await freePort()),
  INTERNAL_PORT: String(internalPort),
  LOG_LEVEL: 'warn',
});
await waitForHttp(`http://127.0.0.1:${internalPort}/readyz`);

/** Batches posted at RATE a second, evenly, each timed from when it was due, until `until` resolves. */
async function ingestAt(until: Promise<unknown>): Promise<{ batches: number; p50: number; p99: number; failed: number }> {
  const pool = new Pool(`http://127.0.0.1:${internalPort}`, { connections: 32 });
  const latencies: number[] = [];
  let failed = 0;
  let done = false;
  void until.then(() => {
    done = true;
  });
  const inFlight = new Set<Promise<void>>();
  const started = performance.now();
  for (let sent = 0; !done; sent += 1) {
    const due = started + (sent * 1000) / RATE;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - performance.now())));
    const body = JSON.stringify({
      events: Array.from({ length: BATCH }, (_, i) => producerEvent(`tenant-${1 + (sent % 9)}`, sent * BATCH + i)),
    });
    const request: Promise<void> = pool
      .request({
        method: 'POST',
        path: '/internal/v1/events',
        headers: { authorization: `Bearer ${BENCH_INGEST_TOKEN}`, 'content-type': 'application/json' },
        body,
      })
      .then(async (response) => {
        await response.body.arrayBuffer();
        if (response.statusCode >= 300) failed += 1;
        latencies.push(performance.now() - due);
      })
      .catch(() => {
        failed += 1;
      })
      .finally(() => inFlight.delete(request));
    inFlight.add(request);
  }
  await Promise.all(inFlight);
  await pool.close();
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * q))] ?? Number.NaN;
  return { batches: latencies.length, p50: at(0.5), p99: at(0.99), failed };
}

const seconds = (s: number) => new Promise((resolve) => setTimeout(resolve, s * 1000));
const before = await ingestAt(seconds(PHASE_S));
const expiry = new Expiry({ db, writer, policies, batchSize: 5000, actor: { userId: 'bench', userRole: 'operator' }, log });
const expiryStarted = performance.now();
const run = expiry.run('tenant-expired');
const during = await ingestAt(run);
const result = await run;
const expirySeconds = (performance.now() - expiryStarted) / 1000;
const after = await ingestAt(seconds(PHASE_S));
await stopProcess(ingest);

const expired = result.tenants[0]?.expired?.count ?? 0;
const left = Number(
  (await db.query(`SELECT count(*) AS n FROM events WHERE tenant_id = 'tenant-expired' AND action NOT LIKE '%.retention.%'`)).rows[0]!.n,
);
const row = (name: string, phase: typeof before) =>
  `| ${name} | ${phase.batches} | ${phase.p50.toFixed(1)} ms | ${phase.p99.toFixed(1)} ms | ${phase.failed} |`;
console.log(
  `\nexpired ${expired} events in ${expirySeconds.toFixed(1)} s (${(expired / expirySeconds).toFixed(0)} events/s), ${left} left`,
);
console.log(`ingest ${RATE} batches/s of ${BATCH} events\n`);
console.log('| phase | batches | p50 | p99 | failed |\n|---|---|---|---|---|');
console.log(row('before (no expiry)', before));
console.log(row('expiry running', during));
console.log(row('after (no expiry)', after));
console.log(
  `\np99 with expiry ÷ baseline p99: ${(during.p99 / before.p99).toFixed(2)} against before, ${(during.p99 / after.p99).toFixed(2)} against after (goal ≤ 2)`,
);
await db.close();
