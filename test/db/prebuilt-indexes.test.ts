import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createDatabaseIfMissing, migrate, migrationsDirectory } from '../../src/db/migrate.ts';
import { databaseUrl, testDatabaseName } from '../support/database.ts';
import { testLogger } from '../support/service.ts';

/** The SQL block of docs/operations.md that builds migration 015's indexes ahead of the upgrade. */
function documentedPrebuild(): string {
  const operations = readFileSync('docs/operations.md', 'utf8');
  const block = [...operations.matchAll(/```sql\n([\s\S]*?)```/g)].map((match) => match[1]!).find((sql) => sql.includes('before 015'));
  if (!block) throw new Error('docs/operations.md has no SQL block for upgrading from before 015');
  return block;
}

describe("migration 015's indexes built beforehand, as docs/operations.md says", function () {
  this.timeout(60_000);
  const name = testDatabaseName('prebuilt');
  const url = databaseUrl(name);
  const before015 = mkdtempSync(join(tmpdir(), 'migrations-014-'));

  after(async () => {
    rmSync(before015, { recursive: true, force: true });
    const admin = new pg.Client({ connectionString: databaseUrl('postgres') });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  });

  it('builds them month by month, twice harmlessly, and the migration then finds them in place', async () => {
    for (const file of readdirSync(migrationsDirectory).filter((file) => Number(file.slice(0, 3)) <= 14)) {
      cpSync(join(migrationsDirectory, file), join(before015, file));
    }
    await createDatabaseIfMissing(url);
    await migrate(url, testLogger(), before015);
    // Rows as a release before 015 stored them: today's write path needs columns of later migrations.
    const months = ['2026-09-15T00:00:00Z', '2026-10-15T00:00:00Z'];
    const seed = new pg.Client({ connectionString: url });
    await seed.connect();
    try {
      for (const month of months) {
        await seed.query('SELECT audit_ensure_event_partition($1)', [month]);
        await seed.query(
          `INSERT INTO events (tenant_id, occurred_at, event_id, action, user_id, user_role, resource_type, resource_id,
                               phi_involved, success)
           SELECT 'tenant-a', $1::timestamptz + i * interval '1 millisecond', gen_random_uuid(), 'phi.read',
                  'u-' || (i % 5), 'clinician', 'claim', 'claim-1', true, true
             FROM generate_series(0, 49) AS i`,
          [month],
        );
      }
    } finally {
      await seed.end();
    }

    for (let run = 0; run < 2; run += 1) {
      const psql = spawnSync('psql', [url, '-X', '-q', '-v', 'ON_ERROR_STOP=1'], { input: documentedPrebuild(), encoding: 'utf8' });
      expect(psql.status, psql.stderr).to.equal(0);
    }
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const expectBuiltEverywhere = async () => {
        const { rows } = await client.query<{ parent: string; valid: boolean; attached: number; partitions: number }>(
          `SELECT c.relname AS parent, x.indisvalid AS valid,
                  (SELECT count(*)::int FROM pg_inherits WHERE inhparent = c.oid) AS attached,
                  (SELECT count(*)::int FROM pg_inherits WHERE inhparent = 'events'::regclass) AS partitions
             FROM pg_class c JOIN pg_index x ON x.indexrelid = c.oid
            WHERE c.relname IN ('events_by_user', 'events_by_resource') ORDER BY 1`,
        );
        expect(rows.map((row) => row.parent)).to.deep.equal(['events_by_resource', 'events_by_user']);
        for (const row of rows) {
          expect(row.valid, row.parent).to.equal(true);
          expect(row.attached, row.parent).to.equal(row.partitions);
        }
      };
      // Built by the documented SQL alone, before the migration runs...
      await expectBuiltEverywhere();
      const applied = await migrate(url, testLogger());
      expect(applied.applied).to.include('015_actor_and_resource_indexes.sql');
      // ...which leaves them as they are.
      await expectBuiltEverywhere();
      // A month created afterwards gets both from the table.
      await client.query(`SELECT audit_ensure_event_partition('2031-03-01T00:00:00Z')`);
      const later = await client.query(
        `SELECT indexdef FROM pg_indexes WHERE tablename = 'events_2031_03' AND indexdef LIKE '%_id, occurred_at%'`,
      );
      expect(later.rows.map((row) => row.indexdef).join('\n'))
        .to.include('(tenant_id, user_id,')
        .and.include('(tenant_id, resource_id,');
    } finally {
      await client.end();
    }
  });
});
