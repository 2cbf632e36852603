import { parseArgs } from 'node:util';
import type { Config } from '../config/config.ts';
import { Database } from '../db/database.ts';
import { checkIntegrity } from '../integrity/integrityCheck.ts';
import type { Logger } from '../platform/logger.ts';
import { INTEGRITY_USAGE } from './usage.ts';

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
  if (subcommand !== 'check') {
    process.stderr.write(`audit-trail integrity takes check\nusage: ${INTEGRITY_USAGE}\n`);
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
