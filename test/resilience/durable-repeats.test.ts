import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { producerEvent } from '../support/newEvents.ts';
import { PrivatePostgres } from '../support/private-services.ts';
import { TEST_INGEST_TOKEN, call, startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

/**
 * An acknowledged event survives a failover even when its acknowledgement answered a retry. A commit waiting
 * for a synchronous standby whose session is ended (pg_terminate_backend, an operator's or a tool's) stays
 * committed on the primary alone, and visible there: the producer got an error and retries, and the retry
 * found its events stored and was answered "duplicate" at once, though a failover before the standby confirmed
 * would lose them. On a Postgres of the test's own whose synchronous standby never comes, every commit waits
 * until the setting is lifted: the repeat must wait too.
 */
describe('a repeat of a batch whose first copy waits for its synchronous standby', function () {
  this.timeout(60_000);
  let postgres: PrivatePostgres;
  let db: TestDatabase;
  let service: TestService;

  before(async () => {
    postgres = await PrivatePostgres.start();
    db = await createTestDatabase(postgres.url);
    service = await startTestService({ databaseUrl: db.url, roles: ['ingest'] });
  });

  after(async () => {
    await service?.stop();
    await db?.pool.end().catch(() => undefined);
    await postgres?.remove();
  });

  /** synchronous_standby_names of the private server, as an operator sets it. */
  async function synchronousStandby(names: string | undefined): Promise<void> {
    const client = new pg.Client({ connectionString: `${postgres.url}/postgres` });
    await client.connect();
    try {
      await client.query(
        names === undefined ? 'ALTER SYSTEM RESET synchronous_standby_names' : `ALTER SYSTEM SET synchronous_standby_names = '${names}'`,
      );
      await client.query('SELECT pg_reload_conf()');
    } finally {
      await client.end();
    }
  }

  const ingest = (body: unknown) =>
    call(`${service.internalUrl}/internal/v1/events`, { headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}` }, body });

  /** Sessions of the test's database whose commit waits for the standby. */
  async function waitingForStandby(): Promise<number[]> {
    const waiting = await db.pool.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND datname = current_database()`,
    );
    return waiting.rows.map((row) => row.pid);
  }

  /**
   * A batch whose first copy's commit waits for the standby. pg_reload_conf only signals: each server process
   * takes the new setting at its own pace, the checkpointer (which tells commits whether to wait) included, so
   * a batch sent at once may commit without waiting (the likely cause of a timeout in a suite run on a busy
   * machine; not reproduced on its own). Such a batch is stored and answered; another is sent until one waits.
   */
  async function firstCopyWaiting() {
    for (let attempt = 1; ; attempt++) {
      // Ids and times of the producer's own, as a retry sends them again unchanged.
      const repeatable = () => producerEvent({ tenant_id: 'repeats', event_id: randomUUID(), timestamp: new Date().toISOString() });
      const batch = { events: [repeatable(), repeatable()] };
      let answered = false;
      const first = ingest(batch).finally(() => (answered = true));
      await waitFor(async () => answered || (await waitingForStandby()).length > 0, 'the first copy answered or waiting', 10_000);
      if (!answered) return { batch, first };
      expect((await first).status, 'a batch committed before the setting took effect').to.equal(200);
      expect(attempt, 'attempts before a commit waited for the standby').to.be.below(20);
      await sleep(100);
    }
  }

  it('is answered once the standby confirms the first copy, not at once as a duplicate', async () => {
    // A first write makes the month's partition, whose creation would otherwise wait for the standby too.
    expect((await ingest({ events: [producerEvent({ tenant_id: 'before' })] })).status).to.equal(200);
    await synchronousStandby('standby_that_never_comes');
    let lifted = false;
    try {
      const { batch, first } = await firstCopyWaiting();
      for (const pid of await waitingForStandby()) await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
      expect((await first).status, 'the first copy, its session ended').to.equal(503);
      const ids = batch.events.map((event) => String(event.event_id));
      const stored = await db.pool.query(`SELECT count(*) FROM events WHERE event_id = ANY($1::uuid[])`, [ids]);
      expect(Number(stored.rows[0].count), 'the first copy, visible on the primary').to.equal(2);
      let repeatAnswered = false;
      const repeat = ingest(batch).finally(() => (repeatAnswered = true));
      // That something does not happen is seen over a window: the repeat's answer, immediate before the fix.
      await sleep(1_500);
      expect(repeatAnswered, 'the repeat answered while the first copy waits for the standby').to.equal(false);

      await synchronousStandby(undefined);
      lifted = true;
      const repeatAnswer = await repeat;
      expect(repeatAnswer.status).to.equal(200);
      expect(repeatAnswer.json).to.deep.include({ stored: 0, duplicates: 2 });
    } finally {
      if (!lifted) await synchronousStandby(undefined);
    }
  });
});
