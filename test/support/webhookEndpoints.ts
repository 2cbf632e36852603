import type { WebhookEndpoint } from '../../src/webhooks/webhookEndpoint.ts';
import { SecretBox } from '../../src/webhooks/secretBox.ts';
import { TEST_ENCRYPTION_KEY } from './service.ts';

/**
 * A registered endpoint as the store returns it, with the defaults a new one has (active, HMAC signing, no
 * options set): tests of the decisions over endpoints name only what their case turns on.
 */
export function webhookEndpoint(changes: Partial<WebhookEndpoint> = {}): WebhookEndpoint {
  return {
    id: `wh_${'a'.repeat(32)}`,
    tenantId: 'acme',
    url: 'https://hooks.example.com/audit',
    eventFilter: [],
    description: '',
    active: true,
    disabledReason: null,
    consecutiveFailures: 0,
    lastDeliveryAt: null,
    managedBy: null,
    createdAt: new Date(0),
    disabledAt: null,
    previousSecretExpiresAt: null,
    kind: 'events',
    publicKey: null,
    previousPublicKey: null,
    payloadFilter: null,
    headerNames: [],
    timeoutS: null,
    retryScheduleS: null,
    rateLimitPerS: null,
    ordered: false,
    signatureSchemes: ['hmac'],
    ...changes,
  };
}

/**
 * An endpoint row written straight into the store, past registration and its checks: for a URL registration
 * would refuse (a private address, a name resolving to one) or a test that wants no registration event. Its
 * secret is sealed with `encryptionKey`, the suite's key unless the test wants one the service cannot open.
 */
export async function insertEndpointRow(
  db: { query(text: string, values: unknown[]): Promise<unknown> },
  row: { id: string; tenantId: string; url: string; encryptionKey?: string },
): Promise<void> {
  const secret = new SecretBox(row.encryptionKey ?? TEST_ENCRYPTION_KEY).seal('f'.repeat(64));
  await db.query('INSERT INTO webhook_endpoints (id, tenant_id, url, secret_ciphertext) VALUES ($1, $2, $3, $4)', [
    row.id,
    row.tenantId,
    row.url,
    secret,
  ]);
}
