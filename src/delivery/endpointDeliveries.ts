import type { Queryable } from '../db/database.ts';
import type { EndpointDeliveries } from '../webhooks/webhookRegistry.ts';
import { recordOperationalEvent } from './operationalFanOut.ts';
import { wakeRelaysIfAny } from './relayWakeUp.ts';

/**
 * What becomes of an endpoint's deliveries when the endpoint changes, for the webhook registry (which
 * declares the port) and for auto-disable. Each runs in the transaction that changes the endpoint, after
 * its row lock.
 */
export const ENDPOINT_DELIVERIES: EndpointDeliveries = {
  cancel: cancelPendingDeliveries,
  remove: deleteEndpointDeliveries,
  releaseQueued: releaseQueuedDeliveries,
  notify: recordOperationalEvent,
};

/**
 * Cancels an endpoint's pending deliveries, retries included, so nothing more is attempted (an endpoint
 * disabled by hand or automatically). Run after the endpoint's row is locked.
 */
export async function cancelPendingDeliveries(db: Queryable, endpointId: string): Promise<void> {
  await db.query(
    `UPDATE deliveries SET state = 'cancelled', completed_at = now() WHERE endpoint_id = $1 AND state IN ('pending', 'parked', 'queued')`,
    [endpointId],
  );
}

/**
 * Makes the deliveries an ordered endpoint had waiting for their turn due now (it is ordered no more), and
 * wakes the relays. Run after the endpoint's row lock, which fan-out's KEY SHARE waits for: no queued delivery
 * is written after this.
 */
async function releaseQueuedDeliveries(db: Queryable, endpointId: string): Promise<void> {
  await db.query(
    `WITH released AS (
       UPDATE deliveries SET state = 'pending', due_at = now() WHERE endpoint_id = $1 AND state = 'queued' RETURNING 1
     )
     SELECT ${wakeRelaysIfAny('released')} AS notified`,
    [endpointId],
  );
}

/**
 * Deletes an endpoint's deliveries and their attempts (its delivery history goes with it). Run in the
 * transaction that deletes the endpoint, after its row lock: a fan-out that had locked the endpoint has
 * committed by then and a later one waits and skips it, and each statement reads afresh, so no delivery
 * written meanwhile is left behind.
 */
export async function deleteEndpointDeliveries(db: Queryable, endpointId: string): Promise<void> {
  await db.query('DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM deliveries WHERE endpoint_id = $1)', [endpointId]);
  await db.query('DELETE FROM deliveries WHERE endpoint_id = $1', [endpointId]);
}
