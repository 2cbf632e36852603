import { parseArgs } from 'node:util';
import { ApiKeyService } from '../auth/apiKeyService.ts';
import type { ApiKeyRecord } from '../auth/apiKeyStore.ts';
import { requireSetting, type Config } from '../config/config.ts';
import { Database } from '../db/database.ts';
import { EventWriter } from '../events/eventWriter.ts';
import type { Logger } from '../platform/logger.ts';
import { type Column, TableLayout } from '../client/cli/tableOutput.ts';
import { UsageError } from './usage.ts';
import { WEBHOOK_FAN_OUT } from '../delivery/fanOut.ts';

/** `audit-trail keys mint|revoke|list`: API keys managed by an operator. */
export async function runKeys(args: string[], config: Config, log: Logger): Promise<number> {
  const [subcommand, ...rest] = args;
  const pepper = requireSetting(config.keyPepper, 'KEY_PEPPER', 'audit-trail keys');
  const db = new Database({
    url: config.databaseUrl,
    pooler: config.databasePooler,
    poolSize: 2,
    applicationName: 'audit-trail keys',
    log,
  });
  const service = new ApiKeyService({ db, writer: new EventWriter(db, WEBHOOK_FAN_OUT), pepper, environment: config.keyEnvironment });
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
            scopes: values.scopes
              .split(',')
              .map((scope) => scope.trim())
              .filter(Boolean),
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
          process.stdout.write(new TableLayout(KEY_COLUMNS).table(records.map(describeKey)));
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

type DescribedKey = ReturnType<typeof describeKey>;

/** `keys list`'s table: a header, and columns as wide as their widest value. */
const KEY_COLUMNS: readonly Column<DescribedKey>[] = [
  { title: 'LOOKUP_ID', width: 8, value: (key) => key.lookup_id },
  { title: 'STATE', width: 7, value: (key) => key.state },
  { title: 'TENANT', width: 0, value: (key) => key.tenant_id },
  { title: 'SCOPES', width: 0, value: (key) => key.scopes.join(',') },
  { title: 'DESCRIPTION', width: 0, value: (key) => key.description },
];

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
