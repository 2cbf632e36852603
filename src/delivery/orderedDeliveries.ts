import { prepared, type Database, type Queryable } from '../db/database.ts';
import { wakeRelaysIfAny } from './relayWakeUp.ts';

/**
 * Ordered endpoints (docs/webhooks.md "Ordered delivery"): one delivery at a time, in the order the events
 * were written, the next only once the one before has succeeded or failed for good. Their deliveries are
 * written `queued` (fan-out, replays, a manual retry of a failed one); the oldest becomes pending, and goes
 * through the outbox like any delivery, only while the endpoint has no other pending (or parked) one. A
 * worker killed in the middle of an attempt leaves that delivery pending, so nothing behind it starts until
 * its message comes back to another worker and the attempt is made.
 *
 * Every start happens under the endpoint's row lock (FOR NO KEY UPDATE, which fan-out's KEY SHARE does not
 * wait for), in a statement after the lock was taken, so it sees every start committed before: two can never
 * both find the endpoint idle. The outcome recorder starts the next delivery in the transaction that records
 * the last one's end, holding the lock already; the relays start the first one of an idle endpoint.
 */

/**
 * Starts the oldest queued delivery of each of `endpointIds` that has none pending or parked: due now, and
 * the relays woken. Run under the endpoints' row locks, in a statement after they were taken. Returns how
 * many started.
 */
export async function startNextQueued(db: Queryable, endpointIds: readonly string[]): Promise<number> {
  if (endpointIds.length === 0) return 0;
  const { rows } = await db.query<{ started: number }>(
    prepared(
      `WITH started AS (
         UPDATE deliveries SET state = 'pending', due_at = now()
         WHERE id IN (SELECT head.id
                      FROM unnest($1::text[]) AS idle(endpoint_id)
                      CROSS JOIN LATERAL (SELECT id FROM deliveries
                                          WHERE state = 'queued' AND endpoint_id = idle.endpoint_id
                                          ORDER BY id LIMIT 1) AS head
                      WHERE NOT EXISTS (SELECT 1 FROM deliveries busy
                                        WHERE busy.endpoint_id = idle.endpoint_id AND busy.state IN ('pending', 'parked')))
           AND state = 'queued'
         RETURNING 1
       )
       SELECT count(*)::int AS started, ${wakeRelaysIfAny('started')} AS notified FROM started`,
      [endpointIds],
    ),
  );
  return rows[0]?.started ?? 0;
}

/**
 * The relays' part: for every endpoint with queued deliveries, takes its row lock unless someone holds it
 * (an outcome being recorded starts its next delivery itself), then starts its next delivery if it is idle.
 * The endpoints are found by walking the queued index from one endpoint to the next, so the cost follows the
 * number of such endpoints, not of queued deliveries; none queued is one index probe.
 */
export async function startIdleOrderedEndpoints(db: Database): Promise<number> {
  return db.transaction(async (client) => {
    const { rows } = await client.query<{ id: string }>(
      prepared(
        `WITH RECURSIVE queued_endpoint AS (
           (SELECT endpoint_id FROM deliveries WHERE state = 'queued' ORDER BY endpoint_id LIMIT 1)
           UNION ALL
           SELECT (SELECT d.endpoint_id FROM deliveries d WHERE d.state = 'queued' AND d.endpoint_id > q.endpoint_id
                   ORDER BY d.endpoint_id LIMIT 1)
           FROM queued_endpoint q WHERE q.endpoint_id IS NOT NULL
         )
         SELECT w.id FROM webhook_endpoints w
         WHERE w.id IN (SELECT endpoint_id FROM queued_endpoint WHERE endpoint_id IS NOT NULL) AND w.active
         ORDER BY w.id
         FOR NO KEY UPDATE OF w SKIP LOCKED`,
        [],
      ),
    );
    // A statement of its own, after the locks: it sees what was committed before them.
    return startNextQueued(
      client,
      rows.map((row) => row.id),
    );
  });
}
