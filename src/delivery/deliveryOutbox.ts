import { prepared, type Queryable } from '../db/database.ts';
import { wakeRelaysIfAny } from './relayWakeUp.ts';

/**
 * The delivery outbox, the relays' side: the SQL that claims due deliveries for publication and puts back
 * those whose publication failed or was lost. Its siblings each own one other use of `deliveries` and
 * `delivery_attempts`: fanOut.ts records deliveries in the trail's write statement, deliveryWork.ts loads
 * what a worker sends, outcomeStore.ts records what happened (and parks and releases deliveries of
 * saturated endpoints), endpointDeliveries.ts cancels and deletes an endpoint's, deliveryLog.ts reads the
 * log, deliveryRetry.ts makes a delivery due now, replayStore.ts creates a replay's deliveries. Each
 * function is one statement over arrays, whatever the batch size.
 */

// Ids are bigint; they travel as text (the pool parses int8 as a number, which is exact only to 2^53).
export interface DueDelivery {
  readonly id: string;
  /** The attempt the published message asks for (attempts made so far + 1). */
  readonly attempt: number;
  /** How many times the row has been published, this time included. */
  readonly publication: number;
}

/** One pass of a relay over the outbox: what it took, and the database's clock at the time. */
export interface DuePass {
  readonly due: DueDelivery[];
  readonly now: Date;
  /**
   * Milliseconds until the earliest waiting delivery that was not yet due falls due, on the database's
   * clock; undefined when none waits. Deliveries due now but not taken (another relay holds them) do not
   * count: that relay publishes them.
   */
  readonly nextDueInMs: number | undefined;
}

/**
 * Takes up to `limit` due, unpublished deliveries, oldest due first, and marks them published. Marking
 * comes before publishing, and commits first, so a worker that receives the message at once never finds
 * the row still unmarked; a relay that dies before publishing leaves rows that releaseLostPublications
 * makes due again. SKIP LOCKED lets several relays share the outbox.
 *
 * With `floor`, only deliveries due at or after it are looked at. Every row a pass takes leaves a dead entry
 * at the old end of deliveries_due until VACUUM removes it (autovacuum lets a fifth of a table go dead
 * first), and a pass from the start of the index walks all of them; from a floor it walks only the live
 * end (BENCHMARKS.md, "The outbox's dead index entries", bench/relayPass.ts). The relay knows when a floor
 * is safe (delivery/deliveryRelay.ts).
 */
export async function takeDueDeliveries(db: Queryable, limit: number, floor?: Date): Promise<DuePass> {
  const { rows } = await db.query<{ now: Date; next_due_in_ms: string | null; id: string | null; attempt: number; publication: number }>(
    prepared(
      `WITH taken AS (
       UPDATE deliveries SET published_at = now(), publications = publications + 1
       WHERE id IN (SELECT id FROM deliveries
                    WHERE state = 'pending' AND published_at IS NULL
                      AND due_at <= now() AND due_at >= COALESCE($2::timestamptz, '-infinity')
                    ORDER BY due_at, id
                    LIMIT $1
                    FOR UPDATE SKIP LOCKED)
       RETURNING id, attempts + 1 AS attempt, publications AS publication
     )
     -- One row with the clock (and no delivery) when nothing was due; the next due time in the same
     -- statement, so that an idle relay's pass is one transaction (an index-only look at deliveries_due).
     SELECT clock.now, clock.next_due_in_ms, taken.id::text AS id, taken.attempt, taken.publication
     FROM (SELECT now() AS now,
                  (SELECT ceil(extract(epoch FROM min(due_at) - now()) * 1000)::int8
                   FROM deliveries WHERE state = 'pending' AND published_at IS NULL AND due_at > now()) AS next_due_in_ms
          ) AS clock LEFT JOIN taken ON true`,
      [limit, floor ?? null],
    ),
  );
  const due = rows.filter((row) => row.id !== null).map((row) => ({ id: row.id!, attempt: row.attempt, publication: row.publication }));
  const next = rows[0]!.next_due_in_ms;
  return { due, now: rows[0]!.now, nextDueInMs: next === null ? undefined : Number(next) };
}

/**
 * Milliseconds until the earliest waiting delivery falls due (0 when one is due now), measured on the
 * database's clock like due_at itself; undefined when none waits. An index-only look at deliveries_due,
 * from `floor` when given (see takeDueDeliveries).
 */
export async function timeUntilNextDue(db: Queryable, floor?: Date): Promise<number | undefined> {
  const { rows } = await db.query<{ wait_ms: number | null }>(
    prepared(
      // CASE, not greatest() alone: greatest ignores a NULL, so with nothing waiting it answered 0 ("due
      // now") instead of "nothing waits", and an idle relay looked again every 20 ms.
      `SELECT CASE WHEN min(due_at) IS NOT NULL THEN greatest(0, ceil(extract(epoch FROM min(due_at) - now()) * 1000))::int8 END AS wait_ms
     FROM deliveries WHERE state = 'pending' AND published_at IS NULL AND due_at >= COALESCE($1::timestamptz, '-infinity')`,
      [floor ?? null],
    ),
  );
  return rows[0]?.wait_ms ?? undefined;
}

/** Puts back deliveries whose publication failed, to be taken again at the next pass. */
export async function unmarkPublished(db: Queryable, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await db.query(`UPDATE deliveries SET published_at = NULL WHERE id = ANY($1::bigint[]) AND state = 'pending'`, [ids]);
}

/**
 * Hands deliveries a writer could not publish to the relays: unmarked, as unmarkPublished does, and the
 * relays woken with the payload that makes their next pass a full one (the deliveries keep their due
 * times, which lie below the floor of a relay's quick passes). Only the first publication's rows: one a
 * relay has published since (after a lost-publication sweep) is the relay's.
 */
export async function returnToRelays(db: Queryable, ids: readonly string[]): Promise<number> {
  if (ids.length === 0) return 0;
  const { rows } = await db.query<{ returned: number }>(
    `WITH returned AS (
       UPDATE deliveries SET published_at = NULL
       WHERE id = ANY($1::bigint[]) AND state = 'pending' AND published_at IS NOT NULL AND publications = 1
       RETURNING 1
     )
     SELECT count(*)::int AS returned, ${wakeRelaysIfAny('returned', 'old due times')} AS notified
     FROM returned`,
    [ids],
  );
  return rows[0]?.returned ?? 0;
}

/**
 * Makes deliveries marked published before `publishedBefore` due again: the relay's sweep found that their
 * messages are gone (delivery/lostPublications.ts). Should a message turn up after all, the worker's attempt
 * check makes whichever copy comes second harmless. Also returns the database's clock, which the sweep's
 * next sample is taken on. Without a cutoff it only reads the clock.
 */
export async function releaseLostPublications(db: Queryable, publishedBefore: Date | undefined): Promise<{ now: Date; released: number }> {
  const { rows } = await db.query<{ now: Date; released: number }>(
    `WITH released AS (
       UPDATE deliveries SET published_at = NULL
       WHERE state = 'pending' AND published_at < $1::timestamptz
       RETURNING 1
     )
     SELECT now() AS now, (SELECT count(*) FROM released)::int AS released`,
    [publishedBefore ?? null],
  );
  return rows[0]!;
}

/**
 * The safety net under unparkDeliveries: releases the oldest parked delivery of every endpoint that has
 * any. Parked deliveries are released by requests to their endpoint finishing; should none be left to
 * finish (a release skipped over a locked row, a rollback to code that does not release), this keeps every
 * endpoint's parked deliveries moving. The endpoints are found by walking the parked index from one
 * endpoint to the next, so the cost follows the number of endpoints, not of parked deliveries.
 */
export async function unparkOldestPerEndpoint(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ released: number }>(
    prepared(
      `WITH RECURSIVE parked_endpoint AS (
       (SELECT endpoint_id FROM deliveries WHERE state = 'parked' ORDER BY endpoint_id LIMIT 1)
       UNION ALL
       SELECT (SELECT d.endpoint_id FROM deliveries d WHERE d.state = 'parked' AND d.endpoint_id > p.endpoint_id ORDER BY d.endpoint_id LIMIT 1)
       FROM parked_endpoint p WHERE p.endpoint_id IS NOT NULL
     ), released AS (
       UPDATE deliveries SET state = 'pending'
       WHERE id IN (SELECT oldest.id
                    FROM parked_endpoint p
                    CROSS JOIN LATERAL (SELECT id FROM deliveries
                                        WHERE state = 'parked' AND endpoint_id = p.endpoint_id
                                        ORDER BY due_at, id
                                        LIMIT 1
                                        FOR UPDATE SKIP LOCKED) AS oldest
                    WHERE p.endpoint_id IS NOT NULL)
         AND state = 'parked'
       RETURNING 1
     )
     SELECT count(*)::int AS released, ${wakeRelaysIfAny('released', 'old due times')} AS notified
     FROM released`,
      [],
    ),
  );
  return rows[0]?.released ?? 0;
}
