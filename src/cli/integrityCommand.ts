import { parseArgs } from 'node:util';
import type { Config } from '../config/config.ts';
import { Database } from '../db/database.ts';
import { checkIntegrity } from '../integrity/integrityCheck.ts';
import type { Logger } from '../platform/logger.ts';
import { publishStaticLog } from '../integrity/staticLog.ts';
import { bucketSink, directorySink } from '../integrity/staticLogSinks.ts';
import { TransparencyLog } from '../integrity/transparencyLog.ts';
import { INTEGRITY_USAGE, PUBLISH_USAGE } from './usage.ts';

/**
 * `audit-trail integrity check`: the server-side audit of the stored trail against its Merkle trees
 * (integrity/integrityCheck.ts). Exits 0 when nothing is wrong, 1 naming every problem, 2 for usage.
 */
export async function runIntegrity(
  args: string[],
  config: Config,
  log: Logger,
  out: NodeJS.WritableStream = process.stdout,
): Promise<number> {
  const [subcommand, ...rest] = args;
  if (subcommand === 'publish') return publish(rest, config, log, out);
  if (subcommand !== 'check') {
    process.stderr.write(`audit-trail integrity takes check or publish\nusage: ${INTEGRITY_USAGE}\n       ${PUBLISH_USAGE}\n`);
    return 2;
  }
  const { values } = parseArgs({ args: rest, options: { tenant: { type: 'string' }, json: { type: 'boolean', default: false } } });
  const db = new Database({
    url: config.databaseUrl,
    pooler: config.databasePooler,
    poolSize: 2,
    applicationName: 'audit-trail integrity',
    log,
  });
  try {
    const reports = await checkIntegrity(db, { tenantId: values.tenant, sealIntervalMs: config.seal.intervalMs });
    const problems = reports.flatMap((report) => report.problems);
    if (values.json) {
      out.write(`${JSON.stringify({ tenants: reports, problems: problems.length })}\n`);
    } else {
      for (const problem of problems) out.write(`tenant ${problem.tenantId}: ${problem.kind}: ${problem.message}\n`);
      for (const report of reports) {
        for (const { eventId, leafIndex } of report.redacted)
          out.write(
            `tenant ${report.tenantId}: event ${eventId} (leaf ${leafIndex}): redacted: position and leaf proven, content not re-verifiable\n`,
          );
        const retained =
          (report.retained > 0 ? `, ${report.retained} events removed by retention` : '') +
          (report.redacted.length > 0 ? `, ${report.redacted.length} redacted` : '') +
          (report.expired > 0 ? `, ${report.expired} expired` : '');
        out.write(
          `tenant ${report.tenantId}: ${report.leaves} leaves, ${report.heads} tree heads${retained}: ${report.problems.length === 0 ? 'ok' : `${report.problems.length} problems`}\n`,
        );
      }
    }
    return problems.length === 0 ? 0 : 1;
  } finally {
    await db.close();
  }
}

/**
 * `audit-trail integrity publish`: a static copy of a tenant's log (its checkpoint and tiles) in a directory or
 * the archive bucket, for monitors and witnesses without an API key (integrity/staticLog.ts).
 */
async function publish(args: string[], config: Config, log: Logger, out: NodeJS.WritableStream): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      tenant: { type: 'string' },
      directory: { type: 'string' },
      bucket: { type: 'string' },
      prefix: { type: 'string' },
      all: { type: 'boolean', default: false },
    },
  });
  if (!values.tenant || Boolean(values.directory) === Boolean(values.bucket)) {
    process.stderr.write(`audit-trail integrity publish needs --tenant and one of --directory and --bucket\nusage: ${PUBLISH_USAGE}\n`);
    return 2;
  }
  const db = new Database({
    url: config.databaseUrl,
    pooler: config.databasePooler,
    poolSize: 2,
    applicationName: 'audit-trail integrity publish',
    log,
  });
  const bucket = values.bucket ? bucketSink(config.retention.archiveStore, values.bucket, values.prefix ?? `${values.tenant}/`) : undefined;
  try {
    const sink = bucket ?? directorySink(values.directory!);
    const result = await publishStaticLog(new TransparencyLog(db), values.tenant, sink, values.all);
    const where = values.bucket ? `s3://${values.bucket}/${values.prefix ?? `${values.tenant}/`}` : values.directory;
    out.write(
      `published tenant ${values.tenant}'s log at ${result.size} leaves to ${where} (${result.files} files; it held ${result.previousSize})\n`,
    );
    return 0;
  } finally {
    bucket?.close();
    await db.close();
  }
}
