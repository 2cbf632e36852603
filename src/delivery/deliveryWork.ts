import { prepared, type Queryable } from '../db/database.ts';
import type { DeliveredEvent } from '../client/webhookEnvelope.ts';
import { findAttemptTargets, type AttemptTarget } from '../webhooks/endpointSecretsStore.ts';

/** What a delivery worker reads to make its attempts: the deliveries, their events and their endpoints. */

/** Everything a worker needs for one attempt. `event` fields come from the stored event. */
export interface DeliveryWork {
  readonly deliveryId: string;
  readonly state: string;
  readonly attempts: number;
  readonly published: boolean;
  readonly endpoint: AttemptTarget;
  readonly event: DeliveredEvent;
}

interface WorkRow {
  delivery_id: string;
  state: string;
  attempts: number;
  published: boolean;
  endpoint_id: string;
  event_id: string;
  timestamp: string;
  action: string;
  tenant_id: string;
  user_id: string;
  user_role: string;
  resource_type: string;
  resource_id: string;
  phi_involved: boolean;
  success: boolean;
  details: string;
  [column: string]: unknown;
}

/**
 * Loads a batch of deliveries with their endpoint and event; ids of deleted deliveries are absent. The
 * endpoints are read by a second query, once each (endpointSecretsStore.findAttemptTargets).
 */
export async function loadDeliveryWork(db: Queryable, ids: readonly string[]): Promise<Map<string, DeliveryWork>> {
  const { rows } = await db.query<WorkRow>(
    prepared(
      `SELECT d.id::text AS delivery_id, d.state, d.attempts, d.published_at IS NOT NULL AS published, d.endpoint_id,
            e.event_id, to_char(e.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS timestamp,
            e.action, e.tenant_id, e.user_id, e.user_role, e.resource_type, e.resource_id, e.phi_involved, e.success, e.details
     FROM deliveries d
     JOIN events e ON e.tenant_id = d.tenant_id AND e.occurred_at = d.event_occurred_at AND e.event_id = d.event_id
     WHERE d.id = ANY($1::bigint[])`,
      [ids],
    ),
  );
  if (rows.length === 0) return new Map();
  const endpoints = await findAttemptTargets(db, [...new Set(rows.map((row) => row.endpoint_id))]);
  const work = new Map<string, DeliveryWork>();
  for (const row of rows) {
    // An endpoint deleted between the two reads took its deliveries with it.
    const endpoint = endpoints.get(row.endpoint_id);
    if (!endpoint) continue;
    work.set(row.delivery_id, {
      deliveryId: row.delivery_id,
      state: row.state,
      attempts: row.attempts,
      published: row.published,
      endpoint,
      event: {
        eventId: row.event_id,
        timestamp: row.timestamp,
        action: row.action,
        tenantId: row.tenant_id,
        userId: row.user_id,
        userRole: row.user_role,
        resourceType: row.resource_type,
        resourceId: row.resource_id,
        phiInvolved: row.phi_involved,
        success: row.success,
        details: row.details,
      },
    });
  }
  return work;
}
