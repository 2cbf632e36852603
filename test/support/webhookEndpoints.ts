import type { WebhookEndpoint } from '../../src/webhooks/webhookEndpoint.ts';

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
