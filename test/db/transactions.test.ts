import { expect } from 'chai';
import { Database } from '../../src/db/database.ts';
import { ServiceUnavailableError } from '../../src/platform/errors.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { testLogger } from '../support/service.ts';

/** Raises the given SQLSTATE from the server, as a real conflict or refusal would arrive. */
const raise = (sqlstate: string) => `DO $$ BEGIN RAISE EXCEPTION 'raised by the test' USING ERRCODE = '${sqlstate}'; END $$`;

describe('Database.transaction', () => {
  let testDb: TestDatabase;
  let db: Database;

  before(async () => {
    testDb = await createTestDatabase();
    db = new Database({ url: testDb.url, poolSize: 2, applicationName: 'transaction test', log: testLogger() });
    await db.query('CREATE TABLE tx_marks (note text)');
  });

  after(async () => {
    await db?.close();
    await testDb?.drop();
  });

  it('passes our own plain Error through unchanged, rolls back, and keeps the connection', async () => {
    const ours = new Error('a bug of ours, not the database');
    const failure = await db
      .transaction(async (client) => {
        await client.query(`INSERT INTO tx_marks VALUES ('rolled back')`);
        throw ours;
      })
      .catch((error: unknown) => error);
    expect(failure).to.equal(ours);
    expect(failure).not.to.be.instanceOf(ServiceUnavailableError);
    expect((await db.query(`SELECT count(*)::int AS n FROM tx_marks WHERE note = 'rolled back'`)).rows[0]!.n).to.equal(0);
    // The connection went back to the pool rather than being destroyed as if Postgres were down.
    expect(db.pool.totalCount).to.be.at.least(1);
    expect(db.pool.idleCount).to.equal(db.pool.totalCount);
  });

  for (const sqlstate of ['40001', '40P01']) {
    it(`runs the whole transaction again after ${sqlstate} and returns the result of the run that committed`, async () => {
      let runs = 0;
      const result = await db.transaction(async (client) => {
        runs += 1;
        await client.query(`INSERT INTO tx_marks VALUES ($1)`, [`${sqlstate}-run-${runs}`]);
        if (runs < 3) await client.query(raise(sqlstate));
        return runs;
      });
      expect(result).to.equal(3);
      const { rows } = await db.query<{ note: string }>(`SELECT note FROM tx_marks WHERE note LIKE $1`, [`${sqlstate}-%`]);
      expect(rows.map((row) => row.note)).to.deep.equal([`${sqlstate}-run-3`]);
    });
  }

  it('gives up after a bounded number of runs with a 503', async () => {
    let runs = 0;
    const failure = await db
      .transaction(async (client) => {
        runs += 1;
        await client.query(raise('40P01'));
      })
      .catch((error: unknown) => error);
    expect(failure).to.be.instanceOf(ServiceUnavailableError);
    expect(runs).to.equal(5);
  });

  it('does not run a transaction again for refused data', async () => {
    let runs = 0;
    const failure = await db
      .transaction(async (client) => {
        runs += 1;
        await client.query(raise('23514'));
      })
      .catch((error: unknown) => error);
    expect((failure as { code?: string }).code).to.equal('23514');
    expect(runs).to.equal(1);
  });

  for (const sqlstate of ['57014', '53300', '55P03']) {
    it(`makes ${sqlstate} a 503: the condition passes`, async () => {
      const failure = await db.transaction((client) => client.query(raise(sqlstate))).catch((error: unknown) => error);
      expect(failure).to.be.instanceOf(ServiceUnavailableError);
    });
  }
});
