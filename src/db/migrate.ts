import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { postgresDatabaseName, postgresUrlWithDatabase } from '../config/postgresUrl.ts';
import type { Logger } from '../platform/logger.ts';
import { isCertificateError, untrustedCertificateMessage } from '../platform/tlsFailure.ts';
import { postgresClient } from './postgresClient.ts';

/** migrations/ sits at the package root, beside both src/ and dist/. */
export const migrationsDirectory = fileURLToPath(new URL('../../migrations/', import.meta.url));

// One constant key: every migrator of every version of the service contends for the same lock.
const MIGRATION_LOCK_KEY = 726_151_001;

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

export interface MigrationResult {
  readonly applied: readonly string[];
  readonly current: number;
}

export async function loadMigrations(directory = migrationsDirectory): Promise<Migration[]> {
  const files = (await readdir(directory)).filter((file) => file.endsWith('.sql')).sort();
  const migrations: Migration[] = [];
  for (const file of files) {
    const match = /^(\d+)_([\w-]+)\.sql$/.exec(file);
    if (!match) throw new Error(`Migration file name must be NNN_name.sql: ${file}`);
    migrations.push({ version: Number(match[1]), name: file, sql: await readFile(`${directory}/${file}`, 'utf8') });
  }
  const versions = migrations.map((migration) => migration.version);
  if (new Set(versions).size !== versions.length) throw new Error('Two migrations share a version number');
  return migrations;
}

/**
 * Applies pending migrations, each in its own transaction, under a session advisory lock so that two
 * migrators (two Helm hook retries, a developer and CI) never interleave. Safe to run any number of times.
 */
export async function migrate(databaseUrl: string, log: Logger, directory = migrationsDirectory): Promise<MigrationResult> {
  const migrations = await loadMigrations(directory);
  const client = postgresClient(databaseUrl, { application_name: 'audit-trail migrate' });
  await client.connect().catch((error: unknown) => {
    // The migrate Job is the first to reach Postgres on every install and upgrade: say what to fix.
    if (isCertificateError(error)) throw new Error(untrustedCertificateMessage('Postgres', 'DATABASE_SSL_CA', error), { cause: error });
    throw error;
  });
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    await client.query(`
      CREATE TABLE IF NOT EXISTS audit_schema_migrations (
        version    integer     PRIMARY KEY,
        name       text        NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`);
    const { rows } = await client.query<{ version: number }>('SELECT version FROM audit_schema_migrations');
    const done = new Set(rows.map((row) => row.version));
    const applied: string[] = [];
    for (const migration of migrations) {
      if (done.has(migration.version)) continue;
      log.info({ migration: migration.name }, 'applying migration');
      await client.query('BEGIN');
      try {
        await client.query(migration.sql);
        await client.query('INSERT INTO audit_schema_migrations (version, name) VALUES ($1, $2)', [migration.version, migration.name]);
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK');
        throw new Error(`Migration ${migration.name} failed: ${(error as Error).message}`, { cause: error });
      }
      applied.push(migration.name);
    }
    const current = Math.max(0, ...migrations.map((migration) => migration.version));
    return { applied, current };
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => undefined);
    await client.end();
  }
}

/**
 * Creates the database named in the URL when it does not exist (local development and tests), through the
 * `postgres` database of the same server: with several hosts, of the one that accepts writes.
 */
export async function createDatabaseIfMissing(databaseUrl: string, template?: string): Promise<boolean> {
  const name = postgresDatabaseName(databaseUrl);
  const client = postgresClient(postgresUrlWithDatabase(databaseUrl, 'postgres'), { application_name: 'audit-trail migrate' });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (rowCount) return false;
    const templateClause = template ? ` TEMPLATE ${pg.escapeIdentifier(template)}` : '';
    await client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}${templateClause}`);
    return true;
  } catch (error) {
    // Two processes creating the same database at once: the loser sees duplicate_database.
    if ((error as pg.DatabaseError).code === '42P04') return false;
    throw error;
  } finally {
    await client.end();
  }
}
