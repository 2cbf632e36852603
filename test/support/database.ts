import { createHash, randomBytes } from 'node:crypto';
import pg from 'pg';
import { loadMigrations, migrate } from '../../src/db/migrate.ts';
import { createLogger } from '../../src/platform/logger.ts';

/**
 * Each test file gets a database of its own, cloned from a template that holds the migrated schema. The
 * template's name carries a hash of the migrations, so editing a migration builds a fresh template.
 * A failed run's databases stay for inspection and are swept an hour later.
 */

const SERVER_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432';
const TEST_DB_PREFIX = 'audit_test_';

export function databaseUrl(name: string, server = SERVER_URL): string {
  return `${server}/${name}`;
}

async function withAdmin<T>(server: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: databaseUrl('postgres', server) });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Per server: the machine's, or a private one of an outage test. */
const templateNames = new Map<string, Promise<string>>();

async function migratedTemplate(server: string): Promise<string> {
  const migrations = await loadMigrations();
  const hash = createHash('sha256');
  for (const migration of migrations) hash.update(migration.name).update(migration.sql);
  const name = `audit_template_${hash.digest('hex').slice(0, 12)}`;
  await withAdmin(server, async (admin) => {
    await admin.query('SELECT pg_advisory_lock(726151002)');
    try {
      await sweepOldDatabases(admin);
      const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
      if (exists.rowCount) return;
      await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(`${name}_building`)} WITH (FORCE)`);
      await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(`${name}_building`)}`);
      await migrate(databaseUrl(`${name}_building`, server), createLogger('silent'));
      await admin.query(`ALTER DATABASE ${pg.escapeIdentifier(`${name}_building`)} RENAME TO ${pg.escapeIdentifier(name)}`);
    } finally {
      await admin.query('SELECT pg_advisory_unlock(726151002)');
    }
  });
  return name;
}

/**
 * Drops test databases of runs more than an hour old (their names carry their creation time), so that
 * databases left for inspection do not pile up, without touching those of a run going on beside us.
 */
async function sweepOldDatabases(admin: pg.Client): Promise<void> {
  const { rows } = await admin.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE datname LIKE 'audit\\_test\\_%'`);
  const cutoff = Math.floor(Date.now() / 1000) - 3600;
  for (const { datname } of rows) {
    const created = Number(datname.split('_')[2]);
    if (Number.isFinite(created) && created < cutoff) {
      await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(datname)} WITH (FORCE)`).catch(() => undefined);
    }
  }
}

/**
 * A database name no other test run has, in this clone or another: the creation time (for the sweep) and
 * random bytes, with an optional label saying what the database is for.
 */
export function testDatabaseName(label?: string): string {
  const parts = [String(Math.floor(Date.now() / 1000)), ...(label ? [label] : []), randomBytes(4).toString('hex')];
  return `${TEST_DB_PREFIX}${parts.join('_')}`;
}

export interface TestDatabase {
  readonly name: string;
  readonly url: string;
  /** A client for direct assertions; closed by drop(). */
  readonly pool: pg.Pool;
  drop(): Promise<void>;
}

/** A fresh, migrated database for one test file, on the machine's Postgres unless another server is given. */
export async function createTestDatabase(server = SERVER_URL): Promise<TestDatabase> {
  if (!templateNames.has(server)) templateNames.set(server, migratedTemplate(server));
  const template = await templateNames.get(server)!;
  const name = testDatabaseName();
  await withAdmin(server, (admin) => admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)} TEMPLATE ${pg.escapeIdentifier(template)}`));
  const url = databaseUrl(name, server);
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  pool.on('error', () => undefined);
  // A clone carries its template's deployment identity; each test database stands for a deployment of its own.
  await pool.query(`UPDATE audit_deployment SET deployment_id = substr(replace(gen_random_uuid()::text, '-', ''), 1, 12)`);
  return {
    name,
    url,
    pool,
    async drop() {
      await pool.end();
      await withAdmin(server, (admin) => admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`));
    },
  };
}
