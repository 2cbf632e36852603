import type { Role } from '../../src/main.ts';
import { createTestDatabase, type TestDatabase } from './database.ts';
import { startReceiver, type Reply, type TestReceiver } from './receiver.ts';
import { mintKey, startTestService, type TestService } from './service.ts';

/**
 * What the webhook test files share: a database of their own, the service with the roles they need and
 * private targets allowed (the SSRF guard has its own file), receivers closed at the end, and a tenant of
 * its own for each test, so that counters and trails never mix.
 */
export interface WebhookTestBed {
  readonly db: TestDatabase;
  readonly service: TestService;
  /** `/audit/webhooks` on the service. */
  hooks(): string;
  freshTenant(scopes?: string[]): Promise<{ tenantId: string; key: string }>;
  receiver(reply?: Reply): Promise<TestReceiver>;
  stop(): Promise<void>;
}

export async function startWebhookTestBed(name: string, roles: Role[], env: Record<string, string>): Promise<WebhookTestBed> {
  const db = await createTestDatabase();
  const service = await startTestService({
    databaseUrl: db.url,
    roles,
    env: { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', DELIVERY_RELAY_POLL_MS: '50', ...env },
  });
  const receivers: TestReceiver[] = [];
  let tenants = 0;
  return {
    db,
    service,
    hooks: () => `${service.baseUrl}/audit/webhooks`,
    async freshTenant(scopes = ['audit:read', 'webhooks:write']) {
      tenants += 1;
      const tenantId = `${name}-${tenants}`;
      return { tenantId, key: (await mintKey(db.url, { tenantId, scopes })).key };
    },
    async receiver(reply = 204) {
      const started = await startReceiver(reply);
      receivers.push(started);
      return started;
    },
    async stop() {
      await service.stop();
      await Promise.all(receivers.map((receiver) => receiver.close()));
      await db.drop();
    },
  };
}
