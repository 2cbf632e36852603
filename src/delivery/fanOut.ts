import type { DeliveryFanOut, FanOutPublisher } from '../events/storeBatch.ts';
import { activeEndpointsOf, eventFilterMatches } from '../webhooks/webhookStore.ts';
import { wakeRelaysIfAny } from './relayWakeUp.ts';

/**
 * Webhook fan-out: the SQL the trail's write statement embeds (events/storeBatch.ts) to record one
 * delivery per stored event × matching active endpoint of its tenant. It belongs to the statement that
 * stores the events (docs/webhooks.md: an event is matched against the endpoints active when it is
 * written), so no path can store an event and skip its deliveries.
 */
export const WEBHOOK_FAN_OUT: DeliveryFanOut = {
  clauses: fanOutClauses,
  selected: (publisher) =>
    publisher === 'writer'
      ? // The ids on the first row only (an uncorrelated subquery runs once).
        `CASE WHEN row_number() OVER () = 1 THEN (SELECT array_agg(id::text) FROM fan_out_created) END AS delivery_ids`
      : // Once when deliveries were created, so tenants without webhooks never touch Postgres' notification queue.
        `${wakeRelaysIfAny('fan_out_created')} AS notified`,
};

/**
 * Common table expressions recording the deliveries of the events in `stored` (see DeliveryFanOut): each
 * event to every active endpoint of its tenant whose filter it matches (webhookStore.eventFilterMatches; an
 * endpoint being deleted is waited for and then skipped, and its deletion removes what this wrote:
 * endpointDeliveries.ts). `fan_out_created` yields the new deliveries' ids.
 *
 * Written for the writer to publish, a delivery is marked published when its row is inserted, at the
 * statement's clock rather than its transaction's start, so that the lost-publication sweep's bound (a
 * message is in the stream within the publish timeout of its mark) counts from as late as possible. That
 * saves the relay's claim, a second row version and three index entries per delivery.
 */
function fanOutClauses(stored: string, tenants: string, publisher: FanOutPublisher): string {
  const marked = publisher === 'writer';
  return `fan_out_endpoint AS (
       ${activeEndpointsOf(tenants)}
     ), fan_out_created AS (
       INSERT INTO deliveries (endpoint_id, tenant_id, event_id, event_occurred_at${marked ? ', published_at, publications' : ''})
       SELECT endpoint.id, event.tenant_id, event.event_id, event.occurred_at${marked ? ', clock_timestamp(), 1' : ''}
       FROM ${stored} AS event
       JOIN fan_out_endpoint AS endpoint ON endpoint.tenant_id = event.tenant_id
       WHERE ${eventFilterMatches('endpoint.event_filter', 'event.action')}
       RETURNING id
     )`;
}
