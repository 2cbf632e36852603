import { expect } from 'chai';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';

const DAY = 86_400_000;

/**
 * What a batch of expiry costs (migration 027): the rows it removes, not the table they are in; and the
 * statement-level guard that replaced the per-row one refuses what the row guard refused.
 */
describe('expiry batches, bounded by what they remove', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let client: pg.Client;
  // Three days old, in one month's partition with the other tenant's events (a day apart, never the 1st).
  const base = Date.now() - 3 * DAY;
  const inMonth = (offsetMs: number) => {
    const at = new Date(base);
    if (at.getUTCDate() === 1) at.setUTCDate(2);
    return at.getTime() + offsetMs;
  };

  before(async () => {
    db = await createTestDatabase();
    await seedEvents(db.url, [
      ...Array.from({ length: 200 }, (_, i) => newEvent({ tenantId: 'expiring', occurredAtMs: inMonth(i) })),
      ...Array.from({ length: 4000 }, (_, i) => newEvent({ tenantId: 'kept', occurredAtMs: inMonth(60_000 + i) })),
      newEvent({ tenantId: 'expiring', occurredAtMs: Date.now() - 60_000 }),
    ]);
    client = new pg.Client({ connectionString: db.url });
    await client.connect();
    // As autovacuum would have: with statistics, a join back to the table by key may be planned as a hash join
    // over every row of every partition.
    await client.query('ANALYZE events');
  });

  after(async () => {
    await client?.end();
    await db?.drop();
  });

  const batch = (limit: number) =>
    client.query(
      `INSERT INTO expiry_batches (tenant_id, kept_since, retain, source, batch_limit, requested_by)
       VALUES ('expiring', now() - interval '1 day', '1d', 'default', $1, 'test') RETURNING id::text`,
      [limit],
    );

  it("reads about the rows a batch removes, however many other tenants' rows share their partition", async () => {
    await client.query('BEGIN');
    try {
      // Before the batch: the statistics of this transaction so far, to subtract.
      const read = async () =>
        Number(
          (
            await client.query(
              `SELECT coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0)), 0) AS n
                 FROM pg_stat_xact_user_tables WHERE relname LIKE 'events%'`,
            )
          ).rows[0].n,
        );
      const before = await read();
      await batch(50);
      const removed = Number((await client.query(`SELECT count(*) AS n FROM expired_events`)).rows[0].n);
      expect(removed).to.equal(50);
      // The chosen rows and the removed ones: on tables this small the planner may read all 200 of the tenant's
      // to choose them, but never the 4,000 rows of the other tenant.
      expect((await read()) - before).to.be.at.most(200 + 2 * 50);
    } finally {
      await client.query('ROLLBACK');
    }
  });

  it('refuses a DELETE run at the depth of the expiry with a batch named, unless every row is covered by it', async () => {
    await client.query('BEGIN');
    try {
      const id = (await batch(1)).rows[0].id;
      // A trigger of one's own runs its statements at depth 2, as the expiry's does.
      await client.query(`CREATE TABLE forge (predicate text)`);
      await client.query(`CREATE FUNCTION forge_delete() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          PERFORM set_config('audit_trail.applying_expiry', '${id}', true);
          EXECUTE 'DELETE FROM events WHERE ' || NEW.predicate;
          RETURN NULL;
        END $$`);
      await client.query('CREATE TRIGGER forge_delete AFTER INSERT ON forge FOR EACH ROW EXECUTE FUNCTION forge_delete()');
      const attempt = async (predicate: string) => {
        await client.query('SAVEPOINT attempt');
        try {
          await client.query('INSERT INTO forge VALUES ($1)', [predicate]);
          return 'allowed';
        } catch (error) {
          return (error as { code?: string }).code;
        } finally {
          await client.query('ROLLBACK TO SAVEPOINT attempt');
        }
      };
      expect(await attempt(`tenant_id = 'kept'`), "another tenant's events").to.equal('42501');
      expect(await attempt(`tenant_id = 'expiring'`), "newer than the batch's kept_since as well").to.equal('42501');
      await client.query(
        `INSERT INTO legal_holds (id, tenant_id, reason, reference, managed_by)
         VALUES ('hold_${'0'.repeat(32)}', 'expiring', 'litigation', 'case-1', 'test:hold')`,
      );
      expect(await attempt(`tenant_id = 'expiring' AND occurred_at < now() - interval '1 day'`), 'events a hold in place covers').to.equal(
        '42501',
      );
      expect(Number((await client.query(`SELECT count(*) AS n FROM events WHERE tenant_id = 'kept'`)).rows[0].n), 'nothing left').to.equal(
        4000,
      );
    } finally {
      await client.query('ROLLBACK');
    }
  });

  it('chooses after the key a batch names as where the previous batch of its pass ended', async () => {
    await client.query('BEGIN');
    try {
      const { rows: oldest } = await client.query(
        `SELECT occurred_at, event_id::text FROM events WHERE tenant_id = 'expiring' ORDER BY occurred_at, event_id LIMIT 3`,
      );
      await client.query(
        `INSERT INTO expiry_batches (tenant_id, kept_since, retain, source, batch_limit, requested_by, resume_after_at, resume_after_id)
         VALUES ('expiring', now() - interval '1 day', '1d', 'default', 2, 'test', $1, $2)`,
        [oldest[1].occurred_at, oldest[1].event_id],
      );
      const { rows: removed } = await client.query(`SELECT event_id::text FROM expired_events ORDER BY occurred_at, event_id`);
      const ids = removed.map((row) => row.event_id);
      expect(ids).to.have.length(2).and.include(oldest[2].event_id);
      expect(ids).to.not.include(oldest[0].event_id);
      expect(ids).to.not.include(oldest[1].event_id);
    } finally {
      await client.query('ROLLBACK');
    }
  });
});
