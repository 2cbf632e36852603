/** Relays LISTEN here, so a new delivery is published at once rather than at the next poll. */
export const DELIVERIES_PENDING_CHANNEL = 'audit_deliveries_pending';

/**
 * Common table expressions that record one delivery per stored event × matching active endpoint of its
 * tenant. They belong to the statement that stores the events (SPEC.md: endpoints are matched "at the time
 * the audit event is written"), so no path can store an event and skip its deliveries. `stored` names a
 * relation of that statement with the columns tenant_id, event_id, action and occurred_at; `tenants` is a
 * text[] holding every tenant of the batch. The filter rule is `filterMatches` of webhookRules.ts in SQL: an
 * entry ending in a dot is a prefix, any other entry matches that action and the actions below it.
 */
export function fanOutClauses(stored: string, tenants: string): string {
  return `fan_out_endpoint AS (
       -- KEY SHARE, as a foreign key would take for every row: an endpoint being deleted is waited for and
       -- then skipped, and one fanned out to is not deleted before these deliveries are committed (its
       -- deletion then removes them; webhookStore.deleteEndpoint).
       SELECT id, tenant_id, event_filter FROM webhook_endpoints
       WHERE tenant_id = ANY(${tenants}) AND active
       FOR KEY SHARE
     ), fan_out_created AS (
       INSERT INTO deliveries (endpoint_id, tenant_id, event_id, event_occurred_at)
       SELECT endpoint.id, event.tenant_id, event.event_id, event.occurred_at
       FROM ${stored} AS event
       JOIN fan_out_endpoint AS endpoint ON endpoint.tenant_id = event.tenant_id
       WHERE cardinality(endpoint.event_filter) = 0
          OR EXISTS (SELECT 1 FROM unnest(endpoint.event_filter) AS entry
                     WHERE event.action = entry
                        OR starts_with(event.action, CASE WHEN right(entry, 1) = '.' THEN entry ELSE entry || '.' END))
       RETURNING 1
     )`;
}

/**
 * An expression for the statement's select list that notifies the relays once when fanOutClauses created
 * deliveries (an uncorrelated subquery runs once), so tenants without webhooks never touch Postgres'
 * notification queue. `channel` is the parameter holding DELIVERIES_PENDING_CHANNEL.
 */
export function fanOutNotification(channel: string): string {
  return `(SELECT CASE WHEN count(*) > 0 THEN pg_notify(${channel}, '') END FROM fan_out_created)`;
}
