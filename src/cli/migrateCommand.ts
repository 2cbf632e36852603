import { parseArgs } from 'node:util';
import type { Config } from '../config/config.ts';
import { createDatabaseIfMissing, migrate } from '../db/migrate.ts';
import type { Logger } from '../platform/logger.ts';

/** `audit-trail migrate`: applies the pending migrations (migrations/), optionally creating the database first. */
export async function runMigrate(args: string[], config: Config, log: Logger): Promise<number> {
  const { values } = parseArgs({ args, options: { 'create-database': { type: 'boolean', default: false } } });
  if (values['create-database'] && (await createDatabaseIfMissing(config.databaseUrl))) {
    log.info('created the database');
  }
  const result = await migrate(config.databaseSessionUrl, log);
  log.info({ applied: result.applied, version: result.current }, result.applied.length ? 'migrated' : 'schema up to date');
  return 0;
}
