import type { Queryable } from '../db/database.ts';
import { wakeRelaysIfAny } from './relayWakeUp.ts';

/**
 * SQL of manual retries (docs/webhooks.md "Manual retry"). A retry is made through the outbox like any
 * attempt: the row becomes due now and the relays are notified, in the caller's transaction, so a retry
 * that was accepted is made even if every process dies right after.
 */

/** The delivery's state, row-locked. Run after the endpoint's lock (the lock order: endpoint, then delivery). */
export async function lockDeliveryState(db: Queryable, endpointId: string, deliveryId: string): Promise<string | undefined> {
  const { rows } = await db.query<{ state: string }>('SELECT state FROM deliveries WHERE id = $1::int8 AND endpoint_id = $2 FOR UPDATE', [
    deliveryId,
    endpointId,
  ]);
  return rows[0]?.state;
}

/**
 * Makes a failed or pending delivery due now. A failed one becomes pending for one more attempt (the
 * retry schedule has none left for it, so that attempt is its last) and is marked as already counted
 * against the endpoint, so that failing again does not count it twice; at an ordered endpoint it is queued
 * instead, and goes next, once the delivery under way has finished (the oldest queued goes first). A pending
 * one whose next attempt waits for its time is brought forward, and a parked one (waiting for its hung
 * endpoint) is released as unparkDeliveries would; one already published is being attempted now and is left
 * as is. A queued one keeps waiting for its turn.
 */
export async function scheduleManualRetry(db: Queryable, deliveryId: string, ordered: boolean): Promise<void> {
  await db.query(
    `WITH retried AS (
       UPDATE deliveries
       SET state = CASE WHEN $2::boolean AND state = 'failed' THEN 'queued' ELSE 'pending' END,
           completed_at = NULL,
           due_at = CASE WHEN published_at IS NULL THEN now() ELSE due_at END,
           failure_counted = failure_counted OR state = 'failed'
       WHERE id = $1::int8 AND state IN ('pending', 'parked', 'failed')
       RETURNING state, published_at
     )
     SELECT ${wakeRelaysIfAny(`retried WHERE state = 'pending' AND published_at IS NULL`)} AS notified,
            ${wakeRelaysIfAny(`retried WHERE state = 'queued'`, 'queued deliveries')} AS notified_queued`,
    [deliveryId, ordered],
  );
}
