import { expect } from 'chai';
import pg from 'pg';
import { takeDueDeliveries, timeUntilNextDue } from '../../src/delivery/deliveryOutbox.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { sealKeyPair } from '../support/integrity.ts';
import { PrivatePostgres } from '../support/private-services.ts';
import { startTestService, type TestService } from '../support/service.ts';

/** Seconds over which the transactions are counted, after SETTLE_SECONDS from the service's start. */
const WINDOW_SECONDS = 30;
const SETTLE_SECONDS = 20;

/**
 * Issue 42, item 2: an idle deployment rests (the relay ran its two outbox statements about 48 times a
 * second with nothing to do, whatever DELIVERY_RELAY_POLL_MS said): LISTEN wake-ups and a timer to the next
 * due time, not polling. That deliveries still start on time is delivery.test.ts's ("webhook retry timing"),
 * whose latency tests run alone (scripts/run-suite.ts). The figures are bench/idle.ts's.
 *
 * On a Postgres of its own: during the suite the machine's server counted 42 transactions in this
 * database over a window in which its statement log (log_statement = all, set on the database) showed
 * about 20, all the service's. What made the rest was not found; with 250 files creating and dropping
 * databases beside it, the server's count is not this service's alone.
 */
describe('an idle relay rests', function () {
  this.timeout(90_000);
  let postgres: PrivatePostgres;
  let db: TestDatabase;

  before(async () => {
    postgres = await PrivatePostgres.start();
    db = await createTestDatabase(postgres.url);
  });

  after(async () => {
    await db?.drop();
    await postgres?.remove();
  });

  it('says "nothing waits" for an empty outbox, not "due now"', async () => {
    expect(await timeUntilNextDue(db.pool)).to.equal(undefined);
    const pass = await takeDueDeliveries(db.pool, 10);
    expect(pass.due).to.deep.equal([]);
    expect(pass.nextDueInMs).to.equal(undefined);
  });

  describe('every role but the api and the controller in one process, with the default poll', () => {
    let service: TestService;
    const database = () => new URL(db.url).pathname.slice(1);

    before(async () => {
      service = await startTestService({
        databaseUrl: db.url,
        roles: ['ingest', 'relay', 'worker', 'sealer', 'streams', 'retention'],
        env: { SEAL_SIGNING_KEY: sealKeyPair().privatePem },
      });
    });

    after(async () => {
      await service?.stop();
    });

    /** Transactions of the test database so far, read from another database so that reading is not counted. */
    async function transactions(): Promise<number> {
      const admin = new pg.Client({ connectionString: db.url.replace(/\/[^/]*$/, '/postgres') });
      await admin.connect();
      try {
        const { rows } = await admin.query('SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = $1', [
          database(),
        ]);
        return Number(rows[0].n);
      } finally {
        await admin.end();
      }
    }

    /**
     * The statements the service ran in the test database meanwhile, as pg_stat_activity shows them every
     * 100 ms (a backend's last statement stays there while it is idle), counted by their first words: what a
     * failure names. Two statements of one backend within a sample are seen as one.
     */
    function watchStatements(): { stop(): Promise<string> } {
      const admin = new pg.Client({ connectionString: db.url.replace(/\/[^/]*$/, '/postgres') });
      const lastChange = new Map<number, string>();
      const counts = new Map<string, number>();
      let watching = true;
      const sampling = (async () => {
        await admin.connect();
        while (watching) {
          const { rows } = await admin.query<{ pid: number; changed: string; query: string }>(
            `SELECT pid, state_change::text AS changed, left(regexp_replace(query, '\\s+', ' ', 'g'), 70) AS query
               FROM pg_stat_activity WHERE datname = $1 AND state <> 'active' AND state_change IS NOT NULL`,
            [database()],
          );
          for (const row of rows) {
            if (lastChange.get(row.pid) === row.changed) continue;
            if (lastChange.has(row.pid)) counts.set(row.query, (counts.get(row.query) ?? 0) + 1);
            lastChange.set(row.pid, row.changed);
          }
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        await admin.end();
      })();
      return {
        async stop() {
          watching = false;
          await sampling;
          return [...counts]
            .sort((a, b) => b[1] - a[1])
            .map(([query, count]) => `  ${count} × ${query}`)
            .join('\n');
        },
      };
    }

    it('costs at most a transaction a second with nothing to do', async () => {
      // Settled: every loop has made its first passes, and the start's own statements are counted. A backend
      // flushes its counts when it goes idle, at most once a second; one that stays idle flushes 10 s later.
      // So the settling outlasts the start by more than 10 s, or the counts of a start slowed by a busy
      // machine (its first passes a few seconds after the service was up) land in the window.
      await new Promise((resolve) => setTimeout(resolve, SETTLE_SECONDS * 1000));
      const before = await transactions();
      const statements = watchStatements();
      // The window spans the longest period of the loops (the relay's safety poll, 30 s, five transactions at
      // once): a 12 s window that caught it saw 11 statements where the mean is 0.65 a second, and a
      // backend's unflushed counts at either end move the reading by a few more.
      await new Promise((resolve) => setTimeout(resolve, WINDOW_SECONDS * 1000));
      const perSecond = ((await transactions()) - before) / WINDOW_SECONDS;
      const seen = await statements.stop();
      expect(perSecond, `${perSecond.toFixed(2)} transactions/s; statements seen meanwhile:\n${seen}`).to.be.at.most(1);
    });
  });
});
