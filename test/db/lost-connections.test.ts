import { expect } from 'chai';
import pg from 'pg';
import { Database } from '../../src/db/database.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { captureLog } from '../support/log-capture.ts';
import { waitFor } from '../support/wait.ts';

describe('a pool losing its connections all at once (a failover, a restart)', () => {
  const applicationName = 'lost connections test';
  let testDb: TestDatabase;
  let db: Database;

  before(async () => {
    testDb = await createTestDatabase();
  });

  after(async () => {
    await db?.close();
    await testDb?.drop();
  });

  it('logs one line for the lot, not one per connection, and serves the next query', async () => {
    const capture = captureLog<{ msg: string; err?: { code?: string } }>('warn');
    db = new Database({ url: testDb.url, poolSize: 6, applicationName, log: capture.log });
    // Six connections at once, so that the pool holds six idle ones afterwards.
    await Promise.all(Array.from({ length: 6 }, () => db.query('SELECT pg_sleep(0.05)')));
    expect(db.pool.idleCount).to.equal(6);

    const admin = new pg.Client({ connectionString: testDb.url });
    await admin.connect();
    try {
      const { rowCount } = await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [
        applicationName,
      ]);
      expect(rowCount).to.equal(6);
    } finally {
      await admin.end();
    }
    await waitFor(() => db.pool.totalCount === 0, 'the pool to drop its terminated connections', 5_000);

    const lost = capture.lines().filter((line) => line.msg === 'idle Postgres connection lost');
    expect(lost).to.have.length(1);
    // 57P01, admin_shutdown: what Postgres tells a backend it terminates.
    expect(lost[0]!.err?.code).to.equal('57P01');
    expect((await db.query<{ one: number }>('SELECT 1 AS one')).rows[0]!.one).to.equal(1);
  });
});
