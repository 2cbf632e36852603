import { ApiKeyService } from '../../src/auth/apiKeyService.ts';
import type { Scope } from '../../src/auth/scopes.ts';
import { Database } from '../../src/db/database.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { createLogger } from '../../src/platform/logger.ts';
import { BENCH_PEPPER } from './processes.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';

/** One fresh key per tenant, minted as the operator CLI does. */
export async function mintBenchKeys(databaseUrl: string, tenants: readonly string[], scopes: Scope[]): Promise<Map<string, string>> {
  const db = new Database({ url: databaseUrl, poolSize: 2, applicationName: 'bench keys', log: createLogger('warn') });
  try {
    const service = new ApiKeyService({ db, writer: new EventWriter(db, WEBHOOK_FAN_OUT), pepper: BENCH_PEPPER, environment: 'live' });
    const keys = new Map<string, string>();
    for (const tenant of tenants) {
      keys.set(tenant, (await service.mint({ tenantId: tenant, scopes }, { userId: 'bench', userRole: 'operator' })).key);
    }
    return keys;
  } finally {
    await db.close();
  }
}
