import type { AuditEvent } from './auditEvent.ts';

/**
 * The webhook delivery body, for the service's deliveries and the customer CLI's `listen`, which forwards
 * live events to a local server in the very bytes a webhook endpoint would receive.
 */

/** The stored event fields a delivery is built from (the envelope's source). */
export interface DeliveredEvent {
  readonly eventId: string;
  /** Already in the API's form, `YYYY-MM-DDTHH:mm:ss.SSSZ`. */
  readonly timestamp: string;
  readonly action: string;
  readonly tenantId: string;
  readonly userId: string;
  readonly userRole: string;
  readonly resourceType: string;
  readonly resourceId: string;
  readonly phiInvolved: boolean;
  readonly success: boolean;
  /** The stored JSON object text. */
  readonly details: string;
}

export const ENVELOPE_SCHEMA_VERSION = '1';

/**
 * The delivery body (docs/webhooks.md "The delivery request"). Built only from the stored event with a fixed key
 * order, so every redelivery carries the same bytes; only the signature's timestamp changes. `details`
 * is an object here, unlike the JSON string of the read API.
 */
export function buildEnvelope(event: DeliveredEvent): string {
  return JSON.stringify({
    type: event.action,
    id: event.eventId,
    timestamp: event.timestamp,
    tenant_id: event.tenantId,
    actor: { user_id: event.userId, user_role: event.userRole },
    resource: { type: event.resourceType, id: event.resourceId },
    phi_involved: event.phiInvolved,
    success: event.success,
    details: parseDetails(event.details),
    schema_version: ENVELOPE_SCHEMA_VERSION,
  });
}

/** The envelope's `details` member as JSON text: the stored object text as the envelope carries it. */
export function envelopeDetails(text: string): string {
  return JSON.stringify(parseDetails(text));
}

function parseDetails(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // Ingestion only stores objects; anything else would be a row written around the service.
  }
  return {};
}

/** The delivery fields of an event as the API serves it (list, lookup, live). */
export function deliveredEventOf(event: AuditEvent): DeliveredEvent {
  return {
    eventId: event.event_id,
    timestamp: event.timestamp,
    action: event.action,
    tenantId: event.tenant_id,
    userId: event.user_id,
    userRole: event.user_role,
    resourceType: event.resource_type,
    resourceId: event.resource_id,
    phiInvolved: event.phi_involved,
    success: event.success,
    details: event.details,
  };
}
