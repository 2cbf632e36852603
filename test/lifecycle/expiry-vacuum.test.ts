import { expect } from 'chai';
import pg from 'pg';
import { parseRetentionPeriod } from '../../src/config/valueFormats.ts';
import { Database } from '../../src/db/database.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { Expiry } from '../../src/lifecycle/expiry.ts';
import { RetentionPolicies } from '../../src/lifecycle/retentionPolicies.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { testLogger } from '../support/service.ts';

const DAY = 86_400_000;
const OPERATOR = { userId: 'test-operator', userRole: 'operator' };

/**
 * A pass vacuums the partitions it removed enough from (src/lifecycle/expiry.ts), whether or not autovacuum runs:
 * otherwise the next pass starts by stepping over every row the earlier ones removed (BENCHMARKS.md, issue 31).
 */
describe('expiry vacuums what it removed', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let database: Database;
  let client: pg.Client;
  // Three days old, in one month's partition with the kept tenant's events (never the 1st, so one month).
  const at = new Date(Date.now() - 3 * DAY);
  if (at.getUTCDate() === 1) at.setUTCDate(2);
  const partition = `events_${at.toISOString().slice(0, 7).replace('-', '_')}`;

  before(async () => {
    db = await createTestDatabase();
    database = new Database({ url: db.url, poolSize: 4, applicationName: 'test expiry vacuum', log: testLogger() });
    await seedEvents(db.url, [
      ...Array.from({ length: 2000 }, (_, i) => newEvent({ tenantId: 'expiring', occurredAtMs: at.getTime() + i })),
      ...Array.from({ length: 500 }, (_, i) => newEvent({ tenantId: 'kept', occurredAtMs: at.getTime() + 10_000 + i })),
    ]);
    client = new pg.Client({ connectionString: db.url });
    await client.connect();
  });

  after(async () => {
    await client?.end();
    await database?.close();
    await db?.drop();
  });

  /** Index entries of the tenant's expired range, read as a bitmap scan does: every entry not yet removed. */
  async function entriesInExpiredRange(): Promise<number> {
    await client.query('BEGIN');
    try {
      // Bitmap scans never mark entries dead: they count what a later pass would step over at the worst.
      for (const setting of ['enable_seqscan', 'enable_indexscan', 'enable_indexonlyscan'])
        await client.query(`SET LOCAL ${setting} = off`);
      const { rows } = await client.query(
        `EXPLAIN (ANALYZE, FORMAT JSON) SELECT event_id FROM events WHERE tenant_id = 'expiring' AND occurred_at < now() - interval '2 days'`,
      );
      const nodes: Array<{ 'Node Type': string; 'Actual Rows': number; Plans?: unknown[] }> = [];
      const walk = (node: { 'Node Type': string; 'Actual Rows': number; Plans?: unknown[] }) => {
        nodes.push(node);
        for (const child of node.Plans ?? []) walk(child as typeof node);
      };
      walk(rows[0]['QUERY PLAN'][0].Plan);
      const indexScans = nodes.filter((node) => node['Node Type'] === 'Bitmap Index Scan');
      expect(indexScans, 'a bitmap index scan').to.not.be.empty;
      return indexScans.reduce((sum, node) => sum + node['Actual Rows'], 0);
    } finally {
      await client.query('ROLLBACK');
    }
  }

  it('leaves no index entry of the removed rows for the next pass to step over, and says which partition it vacuumed', async () => {
    expect(await entriesInExpiredRange(), 'before the pass').to.equal(2000);
    const writer = new EventWriter(database, WEBHOOK_FAN_OUT);
    const policies = new RetentionPolicies({ db: database, writer, defaultPeriod: undefined });
    await policies.declare(
      { tenantId: 'expiring', period: parseRetentionPeriod('2d')!, locked: false, archive: null },
      'test:expiring',
      OPERATOR,
    );
    const expiry = new Expiry({ db: database, writer, policies, batchSize: 500, actor: OPERATOR, log: testLogger() });

    const result = await expiry.run('expiring');

    expect(result.tenants[0]?.expired?.count).to.equal(2000);
    expect(await entriesInExpiredRange(), 'after the pass').to.equal(0);
    expect(result.vacuumedPartitions).to.deep.equal([partition]);
    const { rows } = await client.query(`SELECT count(*)::int AS n FROM events WHERE tenant_id = 'kept'`);
    expect(rows[0].n, "the kept tenant's events").to.equal(500);
  });
});
