import { expect } from 'chai';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent, producerEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { TEST_INGEST_TOKEN, call, mintKey, startTestService, type TestService } from '../support/service.ts';

/**
 * A table lock held for long (a migration, a manual LOCK) must not make requests hang until the statement
 * timeout: each waits at most DATABASE_LOCK_TIMEOUT (1 s by default) and answers 503 with Retry-After.
 */
describe('a table lock held for 40 s', function () {
  this.timeout(90_000);
  let db: TestDatabase;
  let service: TestService;
  let key: string;
  let eventId: string;

  before(async () => {
    db = await createTestDatabase();
    const seeded = newEvent({ tenantId: 'locked', occurredAtMs: Date.now() - 60_000 });
    eventId = seeded.eventId;
    await seedEvents(db.url, [seeded]);
    // The defaults (a pool of 10, DATABASE_LOCK_TIMEOUT 1 s), as a pod runs them.
    service = await startTestService({ databaseUrl: db.url, roles: ['api', 'ingest'] });
    key = (await mintKey(db.url, { tenantId: 'locked', scopes: ['audit:read', 'audit:export'] })).key;
  });

  after(async () => {
    await service?.stop();
    await db?.drop();
  });

  const requests = () => [
    ...Array.from({ length: 8 }, () => () => call(`${service.baseUrl}/audit/events?limit=10`, { key })),
    ...Array.from({ length: 2 }, () => () => call(`${service.baseUrl}/audit/events/${eventId}`, { key })),
    ...Array.from({ length: 2 }, () => () => call(`${service.baseUrl}/audit/export`, { key, body: {} })),
    ...Array.from(
      { length: 8 },
      () => () =>
        call(`${service.internalUrl}/internal/v1/events`, {
          headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}` },
          body: { events: [producerEvent({ tenant_id: 'locked' })] },
        }),
    ),
  ];

  it('answers every request within 3 s with 503 and Retry-After, stores nothing, and serves again once it is released @latency', async () => {
    const stored = async () => Number((await db.pool.query(`SELECT count(*) FROM events WHERE tenant_id = 'locked'`)).rows[0].count);
    const before = await stored();
    const locker = new pg.Client({ connectionString: db.url, application_name: 'test locker' });
    await locker.connect();
    let released = false;
    const release = async () => {
      if (released) return;
      released = true;
      await locker.query('ROLLBACK');
      await locker.end();
    };
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE events IN ACCESS EXCLUSIVE MODE');
    // However the test goes, the lock is gone after 40 s.
    const deadline = setTimeout(() => void release(), 40_000);
    try {
      const answers = await Promise.all(
        requests().map(async (send) => {
          const started = performance.now();
          const response = await send();
          return { response, ms: performance.now() - started };
        }),
      );
      for (const { response, ms } of answers) {
        expect(ms, 'time to answer').to.be.below(3_000);
        expect(response.status).to.equal(503);
        expect(response.headers.get('retry-after')).to.equal('1');
        expect(response.json).to.deep.include({ error: 'service_unavailable' });
      }
    } finally {
      clearTimeout(deadline);
      await release();
    }
    expect(await stored()).to.equal(before);
    const after = await Promise.all(requests().map((send) => send()));
    expect(after.map((response) => response.status)).to.deep.equal(after.map(() => 200));
  });
});
