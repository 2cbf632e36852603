import { adminEvent, type Actor } from '../events/adminEvent.ts';
import type { NewEvent } from '../events/eventStore.ts';
import type { WebhookEndpoint } from './webhookEndpoint.ts';

/*
 * The admin.webhook.* events every change of an endpoint writes into the trail (the registry's and the
 * delivery slice's: auto-disable, retry, replay): what they say about the endpoint, and never its secret.
 */

/** What a change can be compared against: the fields a registration or an update sets (header names, never values). */
export function describeEndpoint(endpoint: WebhookEndpoint) {
  return {
    url: endpoint.url,
    event_filter: endpoint.eventFilter,
    description: endpoint.description,
    kind: endpoint.kind,
    payload_filter: endpoint.payloadFilter,
    header_names: endpoint.headerNames,
    timeout_s: endpoint.timeoutS,
    retry_schedule_s: endpoint.retryScheduleS,
    rate_limit_per_s: endpoint.rateLimitPerS,
    ordered: endpoint.ordered,
    signature_schemes: endpoint.signatureSchemes,
  };
}

/** An `admin.webhook.*` event; never the secret. */
export function webhookEvent(action: string, endpoint: WebhookEndpoint, actor: Actor, extra: Record<string, unknown> = {}): NewEvent {
  return adminEvent({
    tenantId: endpoint.tenantId,
    action,
    actor,
    resourceType: 'webhook_endpoint',
    resourceId: endpoint.id,
    details: {
      ...describeEndpoint(endpoint),
      active: endpoint.active,
      consecutive_failures: endpoint.consecutiveFailures,
      managed_by: endpoint.managedBy,
      ...extra,
    },
  });
}
