/**
 * The relay's pass over the outbox as dead index entries pile up between two VACUUMs: the time of one pass
 * that finds one new due delivery, from the start of deliveries_due (a full pass) and from a floor (a quick
 * pass, delivery/deliveryRelay.ts), and of the idle look for the next due time, after 0, 100,000 and 400,000
 * deliveries were published and settled. Autovacuum at its default scale factor lets a fifth of a table go
 * dead before it runs, so a table of two million deliveries reaches the last level between two of its runs.
 *
 *   node bench/relayPass.ts            (make bench runs it too)
 *
 * Runs the service's own outbox functions against a database of its own, with autovacuum off for the table
 * so that the dead entries stay for the measurement (this machine's server has it off anyway).
 */
import { randomBytes } from 'node:crypto';
import { Database } from '../src/db/database.ts';
import { takeDueDeliveries, timeUntilNextDue } from '../src/delivery/deliveryOutbox.ts';
import { createLogger } from '../src/platform/logger.ts';
import { freshDatabase, percentile } from './support/processes.ts';

const SERVER = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432';
const NAME = 'audit_bench_relay_pass';
const LEVELS = (process.env.BENCH_RELAY_PASS_LEVELS ?? '0,100000,400000').split(',').map(Number);
const PASSES = Number(process.env.BENCH_RELAY_PASSES ?? 200);
const BATCH = 500;
const log = createLogger('warn');

/** Median milliseconds of `passes` runs of `pass`, each after one new due delivery is written. */
async function timed(db: Database, passes: number, pass: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let index = 0; index < passes; index += 1) {
    await writeDue(db, 1);
    const started = performance.now();
    await pass();
    times.push(performance.now() - started);
  }
  return Number(
    percentile(
      times.sort((a, b) => a - b),
      50,
    ).toFixed(3),
  );
}

/** Deliveries due now, as fan-out writes them (the outbox has no foreign keys to satisfy). */
async function writeDue(db: Database, count: number): Promise<void> {
  await db.query(
    `INSERT INTO deliveries (endpoint_id, tenant_id, event_id, event_occurred_at)
     SELECT $1, 'bench', gen_random_uuid(), now() FROM generate_series(1, $2)`,
    [`we_${randomBytes(16).toString('hex')}`, count],
  );
}

async function main(): Promise<void> {
  await freshDatabase(SERVER, NAME, log);
  const db = new Database({ url: `${SERVER}/${NAME}`, poolSize: 2, applicationName: 'bench relay pass', log });
  await db.query('ALTER TABLE deliveries SET (autovacuum_enabled = false)');
  const levels = [];
  let settled = 0;
  try {
    for (const level of LEVELS) {
      // Published and settled as the relay and a worker leave them: each of the two updates leaves the row's
      // previous entry in deliveries_due dead.
      if (level > settled) {
        await writeDue(db, level - settled);
        while ((await takeDueDeliveries(db, 5_000)).due.length > 0);
        await db.query(
          `UPDATE deliveries SET state = 'succeeded', published_at = NULL, attempts = 1, completed_at = now() WHERE state = 'pending'`,
        );
        settled = level;
      }
      // A few passes first, as the relay's own make the dead entries known as dead (hint bits, killed items).
      await timed(db, 5, () => takeDueDeliveries(db, BATCH));
      const full = await timed(db, PASSES, () => takeDueDeliveries(db, BATCH));
      const floorAt = (await takeDueDeliveries(db, BATCH)).now;
      const floor = new Date(floorAt.getTime() - 1_000);
      const quick = await timed(db, PASSES, () => takeDueDeliveries(db, BATCH, floor));
      const nextDueFull = await timed(db, PASSES, async () => {
        await timeUntilNextDue(db);
        await takeDueDeliveries(db, BATCH, floor);
      });
      const nextDueQuick = await timed(db, PASSES, async () => {
        await timeUntilNextDue(db, floor);
        await takeDueDeliveries(db, BATCH, floor);
      });
      levels.push({
        dead_deliveries: level,
        full_pass_ms: full,
        quick_pass_ms: quick,
        quick_vs_full: Number((quick / full).toFixed(3)),
        // Each with a quick pass that takes the new delivery, so that the next look starts from an outbox
        // holding nothing due.
        next_due_look_full_ms: Number((nextDueFull - quick).toFixed(3)),
        next_due_look_from_floor_ms: Number((nextDueQuick - quick).toFixed(3)),
      });
    }
  } finally {
    await db.close();
  }
  const report = {
    benchmark: 'relay pass over the outbox',
    command: 'node bench/relayPass.ts',
    passes_per_figure: PASSES,
    levels,
    goal: 'a quick pass costs the same at every level (the full pass is the baseline)',
  };
  console.log(JSON.stringify(report, null, 2));
}

await main();
