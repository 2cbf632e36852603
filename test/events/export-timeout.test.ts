import { expect } from 'chai';
import { Database } from '../../src/db/database.ts';
import { EventExporter } from '../../src/events/eventExport.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { testLogger } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

/**
 * The statement timeout bounds the export's work in Postgres, not how fast the client reads: a client that
 * reads a big export slowly (a slow network, a consumer that processes as it reads) gets all of it.
 */
describe('export read slowly', function () {
  this.timeout(30_000);
  const TIMEOUT_MS = 800;
  let database: TestDatabase;
  let db: Database;

  before(async () => {
    database = await createTestDatabase();
    const t0 = Date.parse('2026-10-05T08:00:00.000Z');
    await seedEvents(
      database.url,
      Array.from({ length: 1_200 }, (_, index) => newEvent({ tenantId: 'slow-reader', occurredAtMs: t0 + index })),
    );
    db = new Database({
      url: database.url,
      poolSize: 2,
      applicationName: 'export timeout test',
      log: testLogger(),
      statementTimeoutMs: TIMEOUT_MS,
    });
  });

  after(async () => {
    await db?.close();
    await database?.drop();
  });

  /** Until the export's connection has waited idle in its transaction for twice the timeout, by Postgres' own clock. */
  const pauseBeyondTimeout = () =>
    waitFor(
      async () =>
        (
          await database.pool.query(
            `SELECT 1 FROM pg_stat_activity
              WHERE datname = current_database() AND application_name = 'export timeout test'
                AND state = 'idle in transaction' AND now() - state_change > $1 * interval '1 millisecond'`,
            [TIMEOUT_MS * 2],
          )
        ).rowCount === 1,
      'the export idle for twice the statement timeout',
      10_000,
    );

  it('streams every row to a reader that pauses longer than the statement timeout, more than once', async () => {
    const session = await new EventExporter(db).open('slow-reader', {});
    let read = 0;
    try {
      for await (const row of session.rows()) {
        expect(JSON.parse(row)).to.have.property('tenant_id', 'slow-reader');
        read += 1;
        // Pauses within the first batch of rows and between later ones, each longer than the timeout.
        if (read === 1 || read === 700) await pauseBeyondTimeout();
      }
    } finally {
      await session.close();
    }
    expect(read).to.equal(1_200);
  });

  it('still stops a query whose own work outlasts the timeout', async () => {
    const client = await db.connect();
    try {
      // Time is what is tested: a query whose own work lasts three times the statement timeout.
      const error = await client.query('SELECT pg_sleep($1)', [(TIMEOUT_MS * 3) / 1000]).then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(error).to.have.property('code', '57014');
    } finally {
      client.release();
    }
  });
});
