import { expect } from 'chai';
import { Database } from '../../src/db/database.ts';
import { CursorCodec } from '../../src/events/cursor.ts';
import { EventReader } from '../../src/events/eventReader.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { TEST_PEPPER, testLogger } from '../support/service.ts';

/**
 * A list page is a prepared statement that Postgres plans once per connection and then runs with its generic
 * plan. Planned at every request, the query over the monthly partitions cost Postgres more than running it
 * (BENCHMARKS.md, "List: planned once, documents put together in Node").
 */
describe('the plan of a list page', () => {
  let database: TestDatabase;
  let db: Database;
  let reader: EventReader;
  const DAY_MS = 86_400_000;
  const NOW = Date.now();

  before(async () => {
    database = await createTestDatabase();
    // One connection: the statements it prepared are the ones pg_prepared_statements shows it.
    db = new Database({ url: database.url, poolSize: 1, applicationName: 'list plans test', log: testLogger() });
    const writer = new EventWriter(db, WEBHOOK_FAN_OUT);
    // Tenants of thousands of events over three months, one of them twice the others: a page is a small part
    // of any tenant's events, as in production (with tens of events per tenant, any plan reads them all).
    const events = Array.from({ length: 10_000 }, (_, index) =>
      newEvent({
        tenantId: index % 5 < 2 ? 'plans-big' : `plans-${index % 5}`,
        occurredAtMs: NOW - (index % 90) * DAY_MS - index,
        userId: `user-${index % 50}`,
      }),
    );
    for (let start = 0; start < events.length; start += 2_000) await writer.write(events.slice(start, start + 2_000), 'test');
    await database.pool.query('ANALYZE events');
    reader = new EventReader(db, new CursorCodec(TEST_PEPPER));
  });

  after(async () => {
    await db?.close();
    await database?.drop();
  });

  it('runs the generic plan once the connection has planned it a few times, for big and small tenants alike', async () => {
    const tenants = ['plans-big', 'plans-2', 'plans-3', 'plans-4'];
    for (let round = 0; round < 5; round += 1) {
      for (const tenant of tenants) {
        const first = JSON.parse(await reader.listPage({ tenantId: tenant, filters: {}, limit: 100, cursor: undefined }));
        expect(first.events.length).to.equal(100);
        await reader.listPage({ tenantId: tenant, filters: { userId: 'user-3' }, limit: 100, cursor: undefined });
      }
    }
    const { rows } = await db.query<{ statement: string; generic_plans: number; custom_plans: number }>(
      `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE '%ORDER BY e.occurred_at DESC, e.event_id DESC%'`,
    );
    expect(rows).to.have.length(2);
    for (const row of rows) {
      // Postgres tries five custom plans before it compares them with the generic one.
      expect(row.custom_plans, row.statement).to.be.at.most(5);
      expect(row.generic_plans, row.statement).to.equal(tenants.length * 5 - row.custom_plans);
    }
  });

  it('plans a page bounded in time (a cursor, since, until) for its own bounds, every time', async () => {
    // The generic plan of such a page cannot see how many rows its bound leaves: for a big tenant it chose a
    // bitmap scan and a sort over every match of an action filter behind a cursor (450 ms against 5 ms).
    for (let round = 0; round < 8; round += 1) {
      const first = JSON.parse(
        await reader.listPage({ tenantId: 'plans-big', filters: { userId: 'user-1' }, limit: 20, cursor: undefined }),
      );
      const second = JSON.parse(
        await reader.listPage({ tenantId: 'plans-big', filters: { userId: 'user-1' }, limit: 20, cursor: first.page.next_cursor }),
      );
      expect(second.events[0].event_id).to.not.equal(first.events[0].event_id);
      await reader.listPage({ tenantId: 'plans-big', filters: { sinceMs: NOW - 30 * DAY_MS }, limit: 20, cursor: undefined });
      await reader.listPage({ tenantId: 'plans-big', filters: { untilMs: NOW - 30 * DAY_MS }, limit: 20, cursor: undefined });
    }
    const { rows } = await db.query<{ statement: string }>(
      `SELECT statement FROM pg_prepared_statements
        WHERE statement LIKE '%(e.occurred_at, e.event_id) <%' OR statement LIKE '%e.occurred_at >= $%' OR statement LIKE '%e.occurred_at < $%'`,
    );
    expect(rows.map((row) => row.statement)).to.deep.equal([]);
  });
});
