import { parseArgs } from 'node:util';
import type { Config } from '../config/config.ts';
import { Database } from '../db/database.ts';
import { WEBHOOK_FAN_OUT } from '../delivery/fanOut.ts';
import { EventWriter } from '../events/eventWriter.ts';
import { ArchiveStore } from '../lifecycle/archiveStore.ts';
import { Expiry, type TenantExpiry } from '../lifecycle/expiry.ts';
import { RetentionPolicies } from '../lifecycle/retentionPolicies.ts';
import type { Logger } from '../platform/logger.ts';
import { UsageError } from './usage.ts';
import { DutyCycle } from '../platform/dutyCycle.ts';

/**
 * `audit-trail retention plan|run [--tenant T]`: what the next expiry pass would remove (counts per tenant and
 * month, and what holds keep), or one pass now, as the retention role does on its schedule (for a CronJob).
 */
export async function runRetention(args: string[], config: Config, log: Logger): Promise<number> {
  const [subcommand, ...rest] = args;
  if (subcommand !== 'plan' && subcommand !== 'run') throw new UsageError('retention takes plan or run; see audit-trail retention --help');
  const { values } = parseArgs({ args: rest, options: { tenant: { type: 'string' }, json: { type: 'boolean', default: false } } });
  const db = new Database({
    url: config.databaseUrl,
    pooler: config.databasePooler,
    poolSize: 2,
    applicationName: 'audit-trail retention',
    log,
  });
  const archiveStore = new ArchiveStore(config.retention.archiveStore);
  try {
    const writer = new EventWriter(db, WEBHOOK_FAN_OUT);
    const expiry = new Expiry({
      db,
      writer,
      policies: new RetentionPolicies({ db, writer, defaultPeriod: config.retentionDefault }),
      batchSize: config.retention.batchSize,
      dutyCycle: new DutyCycle(config.retention.dutyCycle),
      actor: { userId: config.operatorActor, userRole: 'operator' },
      log,
      archiveStore,
    });
    if (subcommand === 'plan') {
      const plans = await expiry.plan(values.tenant);
      process.stdout.write(values.json ? `${JSON.stringify(plans.map(describe))}\n` : plans.map(planLines).join(''));
      return 0;
    }
    const result = await expiry.run(values.tenant);
    if (values.json) {
      process.stdout.write(
        `${JSON.stringify({ tenants: result.tenants.map(describe), dropped_partitions: result.droppedPartitions, vacuumed_partitions: result.vacuumedPartitions })}\n`,
      );
    } else {
      for (const tenant of result.tenants)
        process.stdout.write(`${tenant.tenantId}  ${tenant.expired ? runText(tenant) : skippedText(tenant)}\n`);
      for (const partition of result.droppedPartitions) process.stdout.write(`dropped partition ${partition}\n`);
    }
    return result.tenants.some((tenant) => tenant.archiveFailure) ? 1 : 0;
  } finally {
    await archiveStore.close();
    await db.close();
  }
}

function describe(tenant: TenantExpiry) {
  return {
    tenant_id: tenant.tenantId,
    retain: tenant.retain,
    source: tenant.source,
    kept_since: tenant.keptSince?.toISOString() ?? null,
    skipped: tenant.skipped ?? null,
    months: tenant.months.map((month) => ({ month: month.month.toISOString().slice(0, 7), expiring: month.expiring, held: month.held })),
    ...(tenant.expired
      ? {
          expired: {
            count: tenant.expired.count,
            first: tenant.expired.first?.toISOString() ?? null,
            last: tenant.expired.last?.toISOString() ?? null,
          },
        }
      : {}),
    ...(tenant.archive ? { archive: { bucket: tenant.archive.bucket, prefix: tenant.archive.prefix ?? null } } : {}),
    ...(tenant.archives ? { archives: tenant.archives } : {}),
    ...(tenant.archiveFailure ? { archive_failure: tenant.archiveFailure } : {}),
  };
}

function runText(tenant: TenantExpiry): string {
  const archived = tenant.archives
    ? `, archived in ${tenant.archives.map((archive) => `s3://${archive.bucket}/${archive.key}`).join(' ') || 'no object'}`
    : '';
  const failure = tenant.archiveFailure ? `; archive failed, the rest expires nothing: ${tenant.archiveFailure}` : '';
  return `expired ${tenant.expired!.count}${archived}${failure}`;
}

function skippedText(tenant: TenantExpiry): string {
  if (tenant.skipped === 'kept_forever') return 'kept forever (no policy, no RETENTION_DEFAULT)';
  return `${tenant.retain} (${tenant.source}): nothing to expire`;
}

function planLines(tenant: TenantExpiry): string {
  const archive = tenant.archive ? `  archived first to s3://${tenant.archive.bucket}/${tenant.archive.prefix ?? ''}` : '';
  const head = `${tenant.tenantId}  ${tenant.retain ?? 'forever'} (${tenant.source})${tenant.keptSince ? `  before ${tenant.keptSince.toISOString()}` : ''}${archive}`;
  if (tenant.skipped || tenant.months.length === 0) return `${head}  ${skippedText(tenant)}\n`;
  return `${head}\n${tenant.months.map((month) => `  ${month.month.toISOString().slice(0, 7)}  expiring ${month.expiring}  held ${month.held}\n`).join('')}`;
}
