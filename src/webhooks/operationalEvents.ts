import type { Queryable } from '../db/database.ts';
import type { WebhookEndpoint } from './webhookEndpoint.ts';

/**
 * Operational events (docs/webhooks.md "Operational events"): the service's notices to a tenant about its own
 * endpoints and streams, delivered to the tenant's operational endpoints with the same body, signatures and
 * retries as events, and listed by the API and the portal. They are not audit events: they stay out of the
 * trail, and the trail's endpoints never receive them.
 */

export const OPERATIONAL_EVENT_TYPES = [
  'endpoint.failing',
  'endpoint.disabled',
  'endpoint.enabled',
  'stream.failing',
  'stream.recovered',
] as const;
export type OperationalEventType = (typeof OPERATIONAL_EVENT_TYPES)[number];

/**
 * Failed deliveries in a row at which an endpoint is reported failing: half the auto-disable threshold, so
 * the tenant hears of it while there is time to act. Once per streak, when the count reaches it.
 */
export const ENDPOINT_FAILING_AFTER = 5;

/** A notice about to be recorded, with what its delivery body carries besides its type and time. */
export interface OperationalNotice {
  readonly tenantId: string;
  readonly type: OperationalEventType;
  readonly resource: { readonly type: 'webhook_endpoint' | 'log_stream'; readonly id: string };
  /** The body's `success`: false for bad news (failing, disabled), true for good news (enabled, recovered). */
  readonly success: boolean;
  readonly details: Readonly<Record<string, unknown>>;
}

/** A notice about one of the tenant's webhook endpoints; the endpoint's id, url and description go with it. */
export function endpointNotice(
  type: Extract<OperationalEventType, `endpoint.${string}`>,
  endpoint: WebhookEndpoint,
  details: Readonly<Record<string, unknown>> = {},
): OperationalNotice {
  return {
    tenantId: endpoint.tenantId,
    type,
    resource: { type: 'webhook_endpoint', id: endpoint.id },
    success: type === 'endpoint.enabled',
    details: { url: endpoint.url, description: endpoint.description, consecutive_failures: endpoint.consecutiveFailures, ...details },
  };
}

/**
 * A notice about one of the tenant's log streams: it turned failing (its destination refused a batch in a way
 * retrying does not heal) or delivers again.
 */
export function streamNotice(
  type: Extract<OperationalEventType, `stream.${string}`>,
  stream: { readonly id: string; readonly tenantId: string; readonly destinationType: string },
  details: Readonly<Record<string, unknown>> = {},
): OperationalNotice {
  return {
    tenantId: stream.tenantId,
    type,
    resource: { type: 'log_stream', id: stream.id },
    success: type === 'stream.recovered',
    details: { destination_type: stream.destinationType, ...details },
  };
}

/** A recorded notice, as the API lists it. */
export interface OperationalEvent {
  readonly id: string;
  readonly type: OperationalEventType;
  readonly occurredAt: Date;
  /** occurred_at in epoch microseconds, the column's own precision: where a page after this notice starts. */
  readonly occurredUs: string;
  readonly resourceType: string;
  readonly resourceId: string;
  readonly details: Record<string, unknown>;
}

/**
 * The tenant's notices, newest first, `limit` of them, before `before` (the last one of the previous page)
 * when given. The position is compared in microseconds: notices of one batch of outcomes (failing and
 * disabled at once) share a millisecond, and a position cut to a JavaScript Date's milliseconds skipped
 * the older of them.
 */
export async function listOperationalEvents(
  db: Queryable,
  tenantId: string,
  limit: number,
  before?: { readonly occurredUs: string; readonly id: string },
): Promise<OperationalEvent[]> {
  const { rows } = await db.query<{
    id: string;
    type: OperationalEventType;
    occurred_at: Date;
    occurred_us: string;
    resource_type: string;
    resource_id: string;
    details: Record<string, unknown>;
  }>(
    `SELECT id, type, occurred_at, (extract(epoch FROM occurred_at) * 1000000)::int8::text AS occurred_us,
            resource_type, resource_id, details
       FROM webhook_operational_events
      WHERE tenant_id = $1
        AND ($3::int8 IS NULL OR (occurred_at, id) < (timestamptz 'epoch' + $3::int8 * interval '1 microsecond', $4::uuid))
      ORDER BY occurred_at DESC, id DESC LIMIT $2`,
    [tenantId, limit, before?.occurredUs ?? null, before?.id ?? null],
  );
  return rows.map((row) => ({
    id: row.id,
    type: row.type,
    occurredAt: row.occurred_at,
    occurredUs: row.occurred_us,
    resourceType: row.resource_type,
    resourceId: row.resource_id,
    details: row.details,
  }));
}
