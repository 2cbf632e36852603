#!/usr/bin/env node
import './platform/nodeVersionCheck.ts';
import { constants } from 'node:os';
import { parseArgs } from 'node:util';
import { ApiKeyService } from './auth/apiKeyService.ts';
import type { ApiKeyRecord } from './auth/apiKeyStore.ts';
import { INTEGRITY_USAGE, runIntegrity } from './cli/integrityCommand.ts';
import { VERIFY_USAGE, runVerify } from './cli/verifyCommand.ts';
import { ConfigError, loadConfig, requireSetting, type Config } from './config/config.ts';
import { Database } from './db/database.ts';
import { createDatabaseIfMissing, migrate } from './db/migrate.ts';
import { checkImportFile, importEvents } from './ingestion/eventImport.ts';
import { EventWriter } from './events/eventWriter.ts';
import { ROLES, startService, type Role } from './main.ts';
import { AppError } from './platform/errors.ts';
import { stopRequested } from './platform/lifecycle.ts';
import { createLogger, type Logger } from './platform/logger.ts';
import { SERVICE_VERSION } from './platform/version.ts';

const USAGE = `audit-trail ${SERVICE_VERSION}

Usage:
  audit-trail serve [--roles api,ingest,relay,worker,controller,sealer]
  audit-trail migrate [--create-database]
  audit-trail keys mint --tenant T --scopes a,b [--cidr C]... [--description D] [--json]
  audit-trail keys revoke <lookup_id>
  audit-trail keys list [--tenant T] [--json]
  audit-trail import [--allow-old] FILE.ndjson
  ${INTEGRITY_USAGE}
  ${VERIFY_USAGE}

Configuration comes from the environment (DATABASE_URL, REDIS_URL, NATS_URL, PORT, INTERNAL_PORT,
INGEST_TOKENS, KEY_PEPPER, SECRET_ENCRYPTION_KEY, KEY_ENVIRONMENT, LOG_LEVEL, ...); see README.md.
`;

/** Failure the operator must fix; printed as one line without a stack. */
class UsageError extends Error {
  override name = 'UsageError';
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(USAGE);
    return command === undefined ? 2 : 0;
  }
  if (command === '--version') {
    process.stdout.write(`${SERVICE_VERSION}\n`);
    return 0;
  }
  const config = loadConfig();
  // Logs go to stderr for one-shot commands, so stdout carries only their result (the key, for mint).
  const log = createLogger(config.logLevel, command === 'serve' ? undefined : process.stderr);
  switch (command) {
    case 'serve':
      return serve(rest, config, log);
    case 'migrate':
      return runMigrate(rest, config, log);
    case 'keys':
      return keys(rest, config, log);
    case 'import':
      return importFile(rest, config, log);
    case 'integrity':
      return runIntegrity(rest, config, log);
    case 'verify':
      return runVerify(rest);
    default:
      throw new UsageError(`unknown command "${command}"; see audit-trail --help`);
  }
}

async function serve(args: string[], config: Config, log: Logger): Promise<number> {
  const { values } = parseArgs({ args, options: { roles: { type: 'string', default: ROLES.join(',') } } });
  const roles = values.roles.split(',').map((role) => role.trim());
  const unknown = roles.filter((role) => !(ROLES as readonly string[]).includes(role));
  if (unknown.length > 0) throw new UsageError(`unknown role(s) ${unknown.join(', ')}; roles are ${ROLES.join(', ')}`);
  // Listening before start-up, so that a signal during it stops the service once started, gracefully.
  const stop = stopRequested(log, (signal) => process.exit(128 + constants.signals[signal]));
  const service = await startService({ config, roles: roles as Role[], log });
  await stop;
  await service.stop();
  return 0;
}

async function runMigrate(args: string[], config: Config, log: Logger): Promise<number> {
  const { values } = parseArgs({ args, options: { 'create-database': { type: 'boolean', default: false } } });
  if (values['create-database'] && (await createDatabaseIfMissing(config.databaseUrl))) {
    log.info('created the database');
  }
  const result = await migrate(config.databaseUrl, log);
  log.info({ applied: result.applied, version: result.current }, result.applied.length ? 'migrated' : 'schema up to date');
  return 0;
}

async function keys(args: string[], config: Config, log: Logger): Promise<number> {
  const [subcommand, ...rest] = args;
  const pepper = requireSetting(config.keyPepper, 'KEY_PEPPER', 'audit-trail keys');
  const db = new Database({ url: config.databaseUrl, poolSize: 2, applicationName: 'audit-trail keys', log });
  const service = new ApiKeyService({ db, writer: new EventWriter(db), pepper, environment: config.keyEnvironment });
  const actor = { userId: config.operatorActor, userRole: 'operator' };
  try {
    switch (subcommand) {
      case 'mint': {
        const { values } = parseArgs({
          args: rest,
          options: {
            tenant: { type: 'string' },
            scopes: { type: 'string' },
            cidr: { type: 'string', multiple: true, default: [] },
            description: { type: 'string', default: '' },
            json: { type: 'boolean', default: false },
          },
        });
        if (!values.tenant || !values.scopes) throw new UsageError('keys mint needs --tenant and --scopes');
        const minted = await service.mint(
          {
            tenantId: values.tenant,
            scopes: values.scopes.split(',').map((scope) => scope.trim()).filter(Boolean),
            allowedCidrs: values.cidr,
            description: values.description,
          },
          actor,
        );
        process.stdout.write(values.json ? `${JSON.stringify({ key: minted.key, ...describeKey(minted.record) })}\n` : `${minted.key}\n`);
        return 0;
      }
      case 'revoke': {
        const { positionals } = parseArgs({ args: rest, allowPositionals: true, options: {} });
        if (positionals.length !== 1) throw new UsageError('keys revoke takes one lookup id (the 8-hex segment of the key)');
        const record = await service.revoke(positionals[0]!, actor);
        process.stdout.write(`revoked ${record.lookupId} (tenant ${record.tenantId})\n`);
        return 0;
      }
      case 'list': {
        const { values } = parseArgs({ args: rest, options: { tenant: { type: 'string' }, json: { type: 'boolean', default: false } } });
        const records = await service.list(values.tenant);
        if (values.json) {
          process.stdout.write(`${JSON.stringify(records.map(describeKey))}\n`);
        } else {
          for (const record of records) {
            const key = describeKey(record);
            process.stdout.write(`${key.lookup_id}  ${key.state.padEnd(7)}  ${key.tenant_id}  ${key.scopes.join(',')}  ${key.description}\n`);
          }
        }
        return 0;
      }
      default:
        throw new UsageError('keys takes mint, revoke or list; see audit-trail --help');
    }
  } finally {
    await db.close();
  }
}

/**
 * Backfills history: the whole file is checked first (nothing is stored when a line is invalid), then
 * written in batches with progress on stderr. --allow-old lifts INGEST_MAX_EVENT_AGE for this import only.
 */
async function importFile(args: string[], config: Config, log: Logger): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { 'allow-old': { type: 'boolean', default: false } } });
  if (positionals.length !== 1) throw new UsageError('import takes one NDJSON file of events (one JSON event per line)');
  const path = positionals[0]!;
  const window = values['allow-old'] ? { ...config.ingestWindow, maxAgeMs: Number.POSITIVE_INFINITY } : config.ingestWindow;
  const checked = await checkImportFile(path, window);
  if (checked.problems.length > 0) {
    for (const problem of checked.problems) process.stderr.write(`${path}:${problem.line}: ${problem.field} ${problem.message}\n`);
    process.stderr.write(`audit-trail: ${path} has invalid events (the first ${checked.problems.length} problems above); nothing was imported\n`);
    return 1;
  }
  const db = new Database({ url: config.databaseUrl, poolSize: 2, applicationName: 'audit-trail import', log });
  try {
    const done = await importEvents(path, window, new EventWriter(db), (progress) => {
      process.stderr.write(`imported ${progress.written} of ${progress.total} events (${progress.duplicates} already stored)\n`);
    }, checked.total);
    process.stdout.write(`${JSON.stringify({ events: done.total, stored: done.stored, duplicates: done.duplicates })}\n`);
    return 0;
  } finally {
    await db.close();
  }
}

function describeKey(record: ApiKeyRecord) {
  return {
    lookup_id: record.lookupId,
    tenant_id: record.tenantId,
    environment: record.environment,
    scopes: record.scopes,
    allowed_cidrs: record.allowedCidrs,
    description: record.description,
    managed_by: record.managedBy,
    state: record.revokedAt ? 'revoked' : 'active',
    created_at: record.createdAt.toISOString(),
    revoked_at: record.revokedAt?.toISOString() ?? null,
  };
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof ConfigError) process.stderr.write(`audit-trail: configuration error: ${error.message}\n`);
    else if (error instanceof UsageError || error instanceof AppError) process.stderr.write(`audit-trail: ${(error as Error).message}\n`);
    else process.stderr.write(`audit-trail: ${(error as Error)?.stack ?? String(error)}\n`);
    process.exit(1);
  },
);
