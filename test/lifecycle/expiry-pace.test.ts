import { expect } from 'chai';
import { parseRetentionPeriod } from '../../src/config/valueFormats.ts';
import { Database } from '../../src/db/database.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { Expiry } from '../../src/lifecycle/expiry.ts';
import { planTenant } from '../../src/lifecycle/expiryStore.ts';
import { RetentionPolicies } from '../../src/lifecycle/retentionPolicies.ts';
import type { Clock } from '../../src/platform/clock.ts';
import { DutyCycle } from '../../src/platform/dutyCycle.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { testLogger } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

const DAY = 86_400_000;

/** A clock on which every reading is 50 ms after the last, and whose timers fire only when the test says. */
class SteppingClock implements Clock {
  private current = 0;
  readonly due: Array<() => void> = [];
  now(): number {
    this.current += 50;
    return this.current;
  }
  setTimer(fn: () => void): () => void {
    this.due.push(fn);
    return () => {};
  }
}

describe('expiry paced by RETENTION_DUTY_CYCLE', () => {
  let db: TestDatabase;
  let database: Database;

  before(async () => {
    db = await createTestDatabase();
    database = new Database({ url: db.url, poolSize: 2, applicationName: 'test expiry pace', log: testLogger() });
  });

  after(async () => {
    await database?.close();
    await db?.drop();
  });

  it('rests after each batch before the next, and finishes the pass once rested', async () => {
    const writer = new EventWriter(database, WEBHOOK_FAN_OUT);
    const policies = new RetentionPolicies({ db: database, writer, defaultPeriod: undefined });
    await policies.declare({ tenantId: 'paced', period: parseRetentionPeriod('1d')!, locked: false, archive: null }, 'test:paced', {
      userId: 'test',
      userRole: 'operator',
    });
    await seedEvents(
      db.url,
      Array.from({ length: 5 }, (_, i) => newEvent({ tenantId: 'paced', occurredAtMs: Date.now() - 3 * DAY + i })),
    );
    const clock = new SteppingClock();
    const expiry = new Expiry({
      db: database,
      writer,
      policies,
      batchSize: 2,
      dutyCycle: new DutyCycle(0.5, clock),
      actor: { userId: 'test', userRole: 'operator' },
      log: testLogger(),
    });
    const remaining = async () =>
      Number(
        (await database.pool.query(`SELECT count(*) FROM events WHERE tenant_id = 'paced' AND action NOT LIKE '%.retention.%'`)).rows[0]
          .count,
      );

    let finished = false;
    const pass = expiry.run('paced').then(() => {
      finished = true;
    });
    // The first batch of two, then a rest that only the clock ends.
    await waitFor(() => clock.due.length === 1, 'the rest after the first batch');
    expect(await remaining()).to.equal(3);
    expect(finished).to.equal(false);
    clock.due.shift()!();
    await waitFor(() => clock.due.length === 1, 'the rest after the second batch');
    expect(await remaining()).to.equal(1);
    clock.due.shift()!();
    // The third batch removes the last one, fewer than a batch: the pass ends without resting.
    await pass;
    expect(await remaining()).to.equal(0);
    expect(clock.due).to.have.length(0);
    // Each batch after the first resumed where the previous one ended (its last event's key), rather than
    // stepping again over what the pass had removed.
    const { rows } = await database.pool.query(
      `SELECT b.resume_after_at, b.resume_after_id::text,
              (SELECT max(x.occurred_at) FROM expired_events x WHERE x.batch_id = b.id - 1) AS previous_last
         FROM expiry_batches b WHERE b.tenant_id = 'paced' ORDER BY b.id`,
    );
    expect(rows.map((row) => row.resume_after_at?.getTime() ?? null)).to.deep.equal([
      null,
      rows[1].previous_last.getTime(),
      rows[2].previous_last.getTime(),
    ]);
  });

  it('counts what a pass will remove in chunks, resting between them as between batches, holds included', async () => {
    const start = Date.now() - 3 * DAY;
    await seedEvents(
      db.url,
      Array.from({ length: 5 }, (_, i) => newEvent({ tenantId: 'counted', occurredAtMs: start + i * 1000 })),
    );
    const keptSince = new Date(Date.now() - DAY);
    const clock = new SteppingClock();
    const counting = planTenant(database, 'counted', keptSince, new DutyCycle(0.5, clock), 2);
    for (const chunk of [1, 2]) {
      await waitFor(() => clock.due.length === 1, `the rest after chunk ${chunk}`);
      clock.due.shift()!();
    }
    // The third chunk counts the last event, fewer than a chunk: the count ends without resting.
    const [month] = await counting;
    expect(month).to.include({ expiring: 5, held: 0 });
    expect(clock.due).to.have.length(0);

    // A hold in place over the middle three: counted by the hold rule, in chunks as well.
    await database.pool.query(
      `INSERT INTO legal_holds (id, tenant_id, since, until, reason, reference, managed_by)
       VALUES ('hold_${'1'.repeat(32)}', 'counted', $1, $2, 'litigation', 'case-2', 'test:counted')`,
      [new Date(start + 1000), new Date(start + 4000)],
    );
    const [held] = await planTenant(database, 'counted', keptSince, new DutyCycle(1), 2);
    expect(held).to.include({ expiring: 2, held: 3 });
  });
});
