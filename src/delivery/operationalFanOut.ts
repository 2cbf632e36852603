import { randomUUID } from 'node:crypto';
import type { Queryable } from '../db/database.ts';
import type { DeliveredEvent } from '../client/webhookEnvelope.ts';
import { formatTimestamp } from '../events/eventFields.ts';
import type { OperationalNotice } from '../webhooks/operationalEvents.ts';
import { eventFilterMatches, payloadFilterMatches } from '../webhooks/endpointDeliveryStore.ts';
import { wakeRelaysIfAny } from './relayWakeUp.ts';

/**
 * Operational notices and their deliveries (docs/webhooks.md "Operational events"): the notice recorded, and
 * in the same statement a delivery to every active operational endpoint of its tenant whose filters it
 * matches, the endpoint it is about excepted (a failing endpoint is not told of its own failure). The fan-out
 * of events does the same for the trail's endpoints (fanOut.ts), whose kind never receives notices.
 */

/** Who a notice's delivery body names as its actor: the service itself, as its admin events do. */
const SERVICE_ACTOR = { userId: 'audit-trail', userRole: 'system' };

/**
 * Records `notice` and its deliveries in the caller's transaction; the relays are woken when it has any.
 * Operational endpoints are KEY SHARE-locked as fan-out locks the others. The notice's time is the clock's,
 * not the transaction's start (the column's default, now()): a batch of outcomes that takes an endpoint past
 * both thresholds records `endpoint.failing` and then `endpoint.disabled` in one transaction, and with one time
 * the list (newest first, ties by random id) put them in either order.
 */
export async function recordOperationalEvent(db: Queryable, notice: OperationalNotice): Promise<void> {
  await db.query(
    `WITH notice AS (
       INSERT INTO webhook_operational_events (id, tenant_id, occurred_at, type, resource_type, resource_id, success, details)
       VALUES ($1, $2, clock_timestamp(), $3, $4, $5, $6, $7::jsonb)
       RETURNING id, tenant_id, occurred_at, type, resource_id,
                 jsonb_build_object('type', type, 'actor', jsonb_build_object('user_id', $8::text, 'user_role', $9::text),
                                    'resource', jsonb_build_object('type', resource_type, 'id', resource_id),
                                    'phi_involved', false, 'success', success, 'details', details) AS payload
     ), endpoint AS (
       SELECT w.id, w.event_filter, w.payload_filter_path, w.ordered FROM webhook_endpoints w, notice n
       WHERE w.tenant_id = n.tenant_id AND w.kind = 'operational' AND w.active AND w.id <> n.resource_id
       FOR KEY SHARE OF w
     ), created AS (
       INSERT INTO deliveries (endpoint_id, tenant_id, event_id, event_occurred_at, state)
       SELECT endpoint.id, n.tenant_id, n.id, n.occurred_at, CASE WHEN endpoint.ordered THEN 'queued' ELSE 'pending' END
       FROM notice n, endpoint
       WHERE ${eventFilterMatches('endpoint.event_filter', 'n.type')} AND ${payloadFilterMatches('endpoint.payload_filter_path', 'n.payload')}
       RETURNING state
     )
     SELECT ${wakeRelaysIfAny(`created WHERE state = 'pending'`)} AS notified,
            ${wakeRelaysIfAny(`created WHERE state = 'queued'`, 'queued deliveries')} AS notified_queued`,
    [
      randomUUID(),
      notice.tenantId,
      notice.type,
      notice.resource.type,
      notice.resource.id,
      notice.success,
      JSON.stringify(notice.details),
      SERVICE_ACTOR.userId,
      SERVICE_ACTOR.userRole,
    ],
  );
}

interface OperationalWorkRow {
  delivery_id: string;
  state: string;
  attempts: number;
  published: boolean;
  endpoint_id: string;
  event_id: string;
  occurred_at_ms: string;
  type: string;
  tenant_id: string;
  resource_type: string;
  resource_id: string;
  success: boolean;
  details: string;
  [column: string]: unknown;
}

/** A delivery of a notice as the worker loads it, the notice in the fields a delivery body is built from. */
export interface OperationalWork {
  readonly deliveryId: string;
  readonly state: string;
  readonly attempts: number;
  readonly published: boolean;
  readonly endpointId: string;
  readonly event: DeliveredEvent;
}

/**
 * The deliveries among `ids` that carry notices (deliveryWork.ts asks only for those the trail's events did
 * not account for: a rare second query), with their notices.
 */
export async function loadOperationalWork(db: Queryable, ids: readonly string[]): Promise<OperationalWork[]> {
  const { rows } = await db.query<OperationalWorkRow>(
    `SELECT d.id::text AS delivery_id, d.state, d.attempts, d.published_at IS NOT NULL AS published, d.endpoint_id,
            o.id::text AS event_id, (extract(epoch FROM o.occurred_at) * 1000)::int8 AS occurred_at_ms, o.type, o.tenant_id,
            o.resource_type, o.resource_id, o.success, o.details::text AS details
     FROM deliveries d JOIN webhook_operational_events o ON o.id = d.event_id AND o.tenant_id = d.tenant_id
     WHERE d.id = ANY($1::bigint[])`,
    [ids],
  );
  return rows.map((row) => ({
    deliveryId: row.delivery_id,
    state: row.state,
    attempts: row.attempts,
    published: row.published,
    endpointId: row.endpoint_id,
    event: {
      eventId: row.event_id,
      timestamp: formatTimestamp(Number(row.occurred_at_ms)),
      action: row.type,
      tenantId: row.tenant_id,
      userId: SERVICE_ACTOR.userId,
      userRole: SERVICE_ACTOR.userRole,
      resourceType: row.resource_type,
      resourceId: row.resource_id,
      phiInvolved: false,
      success: row.success,
      details: row.details,
    },
  }));
}
