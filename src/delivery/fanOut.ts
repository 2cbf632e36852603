import { storedDocument } from '../events/eventInsert.ts';
import type { DeliveryFanOut, FanOutPublisher } from '../events/storeBatch.ts';
import { activeEndpointsOf, eventFilterMatches, payloadFilterMatches } from '../webhooks/endpointDeliveryStore.ts';
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
      ? // The ids on the first row only (an uncorrelated subquery runs once); queued ones are the relays' to start.
        `CASE WHEN row_number() OVER () = 1 THEN (SELECT array_agg(id::text) FROM fan_out_created WHERE state = 'pending') END AS delivery_ids,
         ${wakeRelaysIfAny(`fan_out_created WHERE state = 'queued'`, 'queued deliveries')} AS notified_queued`
      : // Once when deliveries were created, so tenants without webhooks never touch Postgres' notification queue.
        `${wakeRelaysIfAny(`fan_out_created WHERE state = 'pending'`)} AS notified,
         ${wakeRelaysIfAny(`fan_out_created WHERE state = 'queued'`, 'queued deliveries')} AS notified_queued`,
};

/**
 * Common table expressions recording the deliveries of the events in `stored` (see DeliveryFanOut): each
 * event to every active endpoint of its tenant whose action filter it matches (endpointDeliveryStore.eventFilterMatches)
 * and whose payload filter its delivery body meets (payloadFilterMatches); an endpoint being deleted is
 * waited for and then skipped, and its deletion removes what this wrote: endpointDeliveries.ts.
 * `fan_out_created` yields the new deliveries' ids and states.
 *
 * The body's members a payload filter reads are put together once per event, and only for the tenants with
 * a filtered endpoint (`fan_out_event`, materialised so that it is not recomputed for each endpoint): every
 * other write pays a hash probe per event for it (BENCHMARKS.md, "Payload filters at fan-out").
 *
 * A delivery of an ordered endpoint is written `queued`: it waits for its turn (orderedDeliveries.ts), and
 * the relays are woken to start it. Written for the writer to publish, any other delivery is marked published
 * when its row is inserted, at the statement's clock rather than its transaction's start, so that the
 * lost-publication sweep's bound (a message is in the stream within the publish timeout of its mark) counts
 * from as late as possible. That saves the relay's claim, a second row version and three index entries per
 * delivery.
 */
function fanOutClauses(stored: string, tenants: string, publisher: FanOutPublisher): string {
  const marked = publisher === 'writer';
  return `fan_out_endpoint AS (
       ${activeEndpointsOf(tenants)}
     ), fan_out_event AS MATERIALIZED (
       SELECT event.tenant_id, event.event_id, event.action, event.occurred_at,
              CASE WHEN event.tenant_id IN (SELECT tenant_id FROM fan_out_endpoint WHERE payload_filter_path IS NOT NULL)
                   THEN audit_webhook_payload(${storedDocument('event')}) END AS payload
       FROM ${stored} AS event
     ), fan_out_created AS (
       INSERT INTO deliveries (endpoint_id, tenant_id, event_id, event_occurred_at, state${marked ? ', published_at, publications' : ''})
       SELECT endpoint.id, event.tenant_id, event.event_id, event.occurred_at, CASE WHEN endpoint.ordered THEN 'queued' ELSE 'pending' END
              ${marked ? ', CASE WHEN NOT endpoint.ordered THEN clock_timestamp() END, CASE WHEN endpoint.ordered THEN 0 ELSE 1 END' : ''}
       FROM fan_out_event AS event
       JOIN fan_out_endpoint AS endpoint ON endpoint.tenant_id = event.tenant_id
       WHERE ${eventFilterMatches('endpoint.event_filter', 'event.action')}
         AND ${payloadFilterMatches('endpoint.payload_filter_path', 'event.payload')}
       RETURNING id, state
     )`;
}
