import { expect } from 'chai';
import { Database } from '../../src/db/database.ts';
import { CONTROLLED_RESOURCE_LOCKS, SessionLocks } from '../../src/db/sessionLocks.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { testLogger } from '../support/service.ts';

/** Two processes on one database, each with its own pool, as two controller replicas are. */
describe('session locks', () => {
  let database: TestDatabase;
  let first: Database;
  let second: Database;

  before(async () => {
    database = await createTestDatabase();
    first = new Database({ url: database.url, poolSize: 3, applicationName: 'locks first', log: testLogger() });
    second = new Database({ url: database.url, poolSize: 3, applicationName: 'locks second', log: testLogger() });
  });

  after(async () => {
    await first?.close();
    await second?.close();
    await database?.drop();
  });

  const locks = (db: Database) => new SessionLocks(db, CONTROLLED_RESOURCE_LOCKS);

  it('runs the work of one key at a time across processes, and other keys meanwhile', async () => {
    const key = 'kubernetes:team-a/siem/1f0c';
    const outcome = await locks(first).withLock(key, async () => {
      expect(await locks(second).withLock(key, async () => 'second')).to.deep.equal({ held: false });
      expect(await locks(second).withLock('kubernetes:team-a/other/2a1d', async () => 'other')).to.deep.equal({
        held: true,
        value: 'other',
      });
      return 'first';
    });
    expect(outcome).to.deep.equal({ held: true, value: 'first' });
    // Released once the work is done: the other process takes it at once.
    expect(await locks(second).withLock(key, async () => 'after')).to.deep.equal({ held: true, value: 'after' });
  });

  it('releases the lock when the work fails, and passes the failure on', async () => {
    const key = 'kubernetes:team-a/failing/3b2e';
    const failed = await locks(first)
      .withLock(key, async () => {
        throw new Error('the Kubernetes API answered 503');
      })
      .catch((error: Error) => error.message);
    expect(failed).to.equal('the Kubernetes API answered 503');
    expect(await locks(second).withLock(key, async () => 'taken')).to.deep.equal({ held: true, value: 'taken' });
  });

  it('loses the lock with its connection: a process that dies leaves nothing to wait out', async () => {
    const key = 'kubernetes:team-a/crashing/4c3f';
    const outcome = locks(first).withLock(key, async () => {
      // This process's lock connection is cut, as when its pod is killed (only our own backend is ended). The
      // timeout makes Postgres wait until the backend is gone, and its lock with it, rather than only signal it.
      await first.query(
        `SELECT pg_terminate_backend(pid, 5000) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()
           AND pid IN (SELECT pid FROM pg_stat_activity WHERE application_name = 'locks first')`,
      );
      return locks(second).withLock(key, async () => 'taken over');
    });
    expect(await outcome).to.deep.equal({ held: true, value: { held: true, value: 'taken over' } });
  });
});
