import { prepared, type Queryable } from '../db/database.ts';
import type { NewEvent } from '../events/eventStore.ts';

/** Relays LISTEN here, so a new delivery is published at once rather than at the next poll. */
export const DELIVERIES_PENDING_CHANNEL = 'audit_deliveries_pending';

/**
 * Records one delivery per stored event × matching active endpoint of its tenant, inside the transaction
 * that stores the events (SPEC.md: matched "at the time the audit event is written"). One prepared
 * statement per batch; the filter rule is `filterMatches` of webhookRules.ts in SQL: an entry ending in a
 * dot is a prefix, any other entry matches that action and the actions below it. The relays are notified
 * only when deliveries were created, so tenants without webhooks never touch Postgres' notification queue.
 */
export async function recordDeliveries(db: Queryable, events: readonly NewEvent[]): Promise<number> {
  if (events.length === 0) return 0;
  const { rows } = await db.query<{ created: number }>(
    prepared(`WITH endpoint AS (
       -- KEY SHARE, as a foreign key would take for every row: an endpoint being deleted is waited for and
       -- then skipped, and one fanned out to is not deleted before these deliveries are committed (its
       -- deletion then removes them; webhookStore.deleteEndpoint).
       SELECT id, tenant_id, event_filter FROM webhook_endpoints
       WHERE tenant_id = ANY($1::text[]) AND active
       FOR KEY SHARE
     ), created AS (
       INSERT INTO deliveries (endpoint_id, tenant_id, event_id, event_occurred_at)
       SELECT endpoint.id, event.tenant_id, event.event_id, event.occurred_at
       FROM unnest($1::text[], $2::uuid[], $3::text[], $4::timestamptz[]) AS event(tenant_id, event_id, action, occurred_at)
       JOIN endpoint ON endpoint.tenant_id = event.tenant_id
       WHERE cardinality(endpoint.event_filter) = 0
          OR EXISTS (SELECT 1 FROM unnest(endpoint.event_filter) AS entry
                     WHERE event.action = entry
                        OR starts_with(event.action, CASE WHEN right(entry, 1) = '.' THEN entry ELSE entry || '.' END))
       RETURNING 1
     )
     SELECT count(*)::int AS created, CASE WHEN count(*) > 0 THEN pg_notify($5, '') END AS notified FROM created`,
    [
      events.map((event) => event.tenantId),
      events.map((event) => event.eventId),
      events.map((event) => event.action),
      events.map((event) => new Date(event.occurredAtMs).toISOString()),
      DELIVERIES_PENDING_CHANNEL,
    ]),
  );
  return rows[0]!.created;
}
