import { expect } from 'chai';
import pg from 'pg';
import { migrate } from '../../src/db/migrate.ts';
import { createDatabaseIfMissing } from '../../src/db/migrate.ts';
import { createTestDatabase, databaseUrl, testDatabaseName, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { testLogger } from '../support/service.ts';

describe('schema and migrations', () => {
  describe('audit-trail migrate', () => {
    const name = testDatabaseName('migrate');
    const url = databaseUrl(name);

    after(async () => {
      const admin = new pg.Client({ connectionString: databaseUrl('postgres') });
      await admin.connect();
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    });

    it('migrates an empty database, then is a no-op, also when run concurrently', async () => {
      expect(await createDatabaseIfMissing(url)).to.equal(true);
      const results = await Promise.all([migrate(url, testLogger()), migrate(url, testLogger()), migrate(url, testLogger())]);
      const applied = results.flatMap((result) => result.applied);
      // Each migration applied exactly once across the three concurrent runs.
      expect(applied.length).to.equal(new Set(applied).size);
      expect(applied).to.include('001_events.sql');
      const again = await migrate(url, testLogger());
      expect(again.applied).to.deep.equal([]);
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      const { rows } = await client.query('SELECT version FROM audit_schema_migrations ORDER BY version');
      await client.end();
      expect(rows.map((row) => row.version)).to.deep.equal([...new Set(rows.map((row) => row.version))]);
    });

    it('creates the database through a multi-host URL, on the host that accepts writes', async () => {
      const other = testDatabaseName('migrate_hosts');
      // Port 1 refuses connections: the first host is down, as a failed primary is; the second is the server.
      const server = new URL(databaseUrl(other));
      const hosts = `postgres://${server.username}@127.0.0.1:1,${server.hostname}:${server.port || 5432}/${other}?target_session_attrs=read-write`;
      try {
        expect(await createDatabaseIfMissing(hosts)).to.equal(true);
        expect(await createDatabaseIfMissing(hosts)).to.equal(false);
        expect((await migrate(hosts, testLogger())).applied).to.include('001_events.sql');
      } finally {
        const admin = new pg.Client({ connectionString: databaseUrl('postgres') });
        await admin.connect();
        await admin.query(`DROP DATABASE IF EXISTS ${other} WITH (FORCE)`);
        await admin.end();
      }
    });
  });

  describe('events table', () => {
    let db: TestDatabase;

    before(async () => {
      db = await createTestDatabase();
      await seedEvents(db.url, [newEvent({ tenantId: 'append-only', occurredAtMs: Date.parse('2026-11-10T00:00:00Z') })]);
    });

    after(async () => {
      await db?.drop();
    });

    it('has monthly partitions from last month through three months ahead', async () => {
      const { rows } = await db.pool.query(
        `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'events'::regclass`,
      );
      const names = rows.map((row) => row.relname);
      const now = new Date();
      for (let offset = -1; offset <= 3; offset += 1) {
        const month = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + offset, 1));
        expect(names).to.include(`events_${month.getUTCFullYear()}_${String(month.getUTCMonth() + 1).padStart(2, '0')}`);
      }
    });

    const refusals: Array<[string, string]> = [
      ['UPDATE on the table', `UPDATE events SET action = 'phi.tampered' WHERE tenant_id = 'append-only'`],
      ['DELETE on the table', `DELETE FROM events WHERE tenant_id = 'append-only'`],
      ['TRUNCATE on the table', 'TRUNCATE events'],
      ['UPDATE on a partition', `UPDATE events_2026_11 SET action = 'phi.tampered'`],
      ['DELETE on a partition', 'DELETE FROM events_2026_11'],
      ['TRUNCATE on a partition', 'TRUNCATE events_2026_11'],
      ['an UPDATE that matches no row', `UPDATE events SET action = 'x' WHERE false`],
    ];
    for (const [what, sql] of refusals) {
      it(`refuses ${what}`, async () => {
        const error = await db.pool.query(sql).then(
          () => undefined,
          (thrown: pg.DatabaseError) => thrown,
        );
        expect(error?.code, `${sql} was allowed`).to.equal('42501');
        expect(error?.message).to.include('append-only');
      });
    }

    it('still holds the event untouched after all those attempts', async () => {
      const { rows } = await db.pool.query(`SELECT action FROM events WHERE tenant_id = 'append-only'`);
      expect(rows).to.deep.equal([{ action: 'phi.read' }]);
    });

    it('creates the partition of a month nobody wrote to yet, once, under concurrency', async () => {
      const at = '2031-07-04T12:00:00Z';
      await Promise.all(Array.from({ length: 4 }, () => db.pool.query('SELECT audit_ensure_event_partition($1)', [at])));
      const { rows } = await db.pool.query(`SELECT to_regclass('events_2031_07')::text AS partition`);
      expect(rows[0].partition).to.equal('events_2031_07');
      const denied = await db.pool.query('DELETE FROM events_2031_07').catch((error: pg.DatabaseError) => error);
      expect((denied as pg.DatabaseError).code).to.equal('42501');
    });

    it("has an index in list order for every equality filter of the list, so that none scans a tenant's whole trail", async () => {
      const { rows } = await db.pool.query<{ indexdef: string }>(`SELECT indexdef FROM pg_indexes WHERE tablename = 'events'`);
      const keys = rows.map((row) => /\((.*)\)$/.exec(row.indexdef)![1]);
      for (const column of ['action', 'resource_type', 'phi_involved', 'user_id', 'resource_id']) {
        expect(keys, column).to.include(`tenant_id, ${column}, occurred_at, event_id`);
      }
    });

    it('keeps timestamps at millisecond precision', async () => {
      const error = await db.pool
        .query(
          `INSERT INTO events (tenant_id, occurred_at, event_id, action, user_id, user_role, resource_type, resource_id, phi_involved, success)
           VALUES ('t', '2026-11-10T00:00:00.0001Z', gen_random_uuid(), 'a', 'u', 'r', 'x', 'y', false, true)`,
        )
        .catch((thrown: pg.DatabaseError) => thrown);
      expect((error as pg.DatabaseError).code).to.equal('23514');
    });
  });
});
