import { parseArgs } from 'node:util';
import type { Config } from '../config/config.ts';
import { Database } from '../db/database.ts';
import { listLegalHolds, type LegalHoldRecord } from '../lifecycle/legalHoldStore.ts';
import type { Logger } from '../platform/logger.ts';
import { UsageError } from './usage.ts';

/** `audit-trail holds list`: the legal holds in place (and, with --all, the released ones). */
export async function runHolds(args: string[], config: Config, log: Logger): Promise<number> {
  const [subcommand, ...rest] = args;
  if (subcommand !== 'list') throw new UsageError('holds takes list; see audit-trail holds --help');
  const { values } = parseArgs({
    args: rest,
    options: { tenant: { type: 'string' }, all: { type: 'boolean', default: false }, json: { type: 'boolean', default: false } },
  });
  const db = new Database({
    url: config.databaseUrl,
    pooler: config.databasePooler,
    poolSize: 1,
    applicationName: 'audit-trail holds',
    log,
  });
  try {
    const holds = await listLegalHolds(db, { tenantId: values.tenant, includeReleased: values.all });
    if (values.json) {
      process.stdout.write(`${JSON.stringify(holds.map(describeHold))}\n`);
      return 0;
    }
    if (holds.length === 0) process.stdout.write(values.all ? 'no legal holds\n' : 'no legal holds in place\n');
    for (const hold of holds.map(describeHold)) {
      const range = `${hold.since ?? '(first)'} .. ${hold.until ?? '(open)'}`;
      const actions = hold.action_prefixes.length > 0 ? hold.action_prefixes.join(',') : '(all actions)';
      const state = hold.released_at ? `released ${hold.released_at}` : 'in place';
      process.stdout.write(`${hold.id}  ${hold.tenant_id}  ${range}  ${actions}  ${state}  ${hold.reference}  ${hold.reason}\n`);
    }
    return 0;
  } finally {
    await db.close();
  }
}

function describeHold(hold: LegalHoldRecord) {
  return {
    id: hold.id,
    tenant_id: hold.tenantId,
    since: hold.since?.toISOString() ?? null,
    until: hold.until?.toISOString() ?? null,
    action_prefixes: hold.actionPrefixes,
    reason: hold.reason,
    reference: hold.reference,
    managed_by: hold.managedBy,
    placed_at: hold.placedAt.toISOString(),
    released_at: hold.releasedAt?.toISOString() ?? null,
    released_by: hold.releasedBy,
  };
}
