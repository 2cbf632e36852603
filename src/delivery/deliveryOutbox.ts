import { prepared, type Queryable } from '../db/database.ts';
import type { DeliveredEvent } from '../client/webhookEnvelope.ts';
import { findAttemptTargets, type AttemptTarget } from '../webhooks/webhookStore.ts';
import type { AttemptRecord, DeliveryChange, DeliveryFacts, DeliveryState } from './deliveryStateMachine.ts';
import { wakeRelaysIfAny } from './relayWakeUp.ts';

/**
 * The delivery outbox: the delivery path's SQL on `deliveries` and `delivery_attempts`. Its siblings each
 * own one other use of those tables: fanOut.ts records deliveries in the trail's write statement,
 * endpointDeliveries.ts cancels and deletes an endpoint's, deliveryLog.ts reads the log, deliveryRetry.ts
 * makes a delivery due now, replayStore.ts creates a replay's deliveries. Here: the relay claims due
 * deliveries; the worker loads what to send and records what happened (or parks the delivery while its
 * endpoint is saturated, and releases parked ones as requests to it finish). Each function is one
 * statement over arrays, whatever the batch size.
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
}

/**
 * Takes up to `limit` due, unpublished deliveries, oldest due first, and marks them published. Marking
 * comes before publishing, and commits first, so a worker that receives the message at once never finds
 * the row still unmarked; a relay that dies before publishing leaves rows that releaseLostPublications
 * makes due again. SKIP LOCKED lets several relays share the outbox.
 *
 * With `floor`, only deliveries due at or after it are looked at. Every row a pass takes leaves a dead entry
 * at the old end of deliveries_due until VACUUM removes it (autovacuum lets a fifth of a table go dead
 * first), and a pass from the start of the index walks all of them: after 400,000 settled deliveries a pass
 * took 3.2 ms from the start and 1.0 ms from a floor, the look for the next due time 2.6 and 0.2 ms
 * (bench/relayPass.ts). The relay knows when a floor is safe (delivery/deliveryRelay.ts).
 */
export async function takeDueDeliveries(db: Queryable, limit: number, floor?: Date): Promise<DuePass> {
  const { rows } = await db.query<{ now: Date; id: string | null; attempt: number; publication: number }>(
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
     -- One row with the clock (and no delivery) when nothing was due.
     SELECT clock.now, taken.id::text AS id, taken.attempt, taken.publication
     FROM (SELECT now() AS now) AS clock LEFT JOIN taken ON true`,
      [limit, floor ?? null],
    ),
  );
  const due = rows.filter((row) => row.id !== null).map((row) => ({ id: row.id!, attempt: row.attempt, publication: row.publication }));
  return { due, now: rows[0]!.now };
}

/**
 * Milliseconds until the earliest waiting delivery falls due (0 when one is due now), measured on the
 * database's clock like due_at itself; undefined when none waits. An index-only look at deliveries_due,
 * from `floor` when given (see takeDueDeliveries).
 */
export async function timeUntilNextDue(db: Queryable, floor?: Date): Promise<number | undefined> {
  const { rows } = await db.query<{ wait_ms: number | null }>(
    prepared(
      `SELECT greatest(0, ceil(extract(epoch FROM min(due_at) - now()) * 1000))::int8 AS wait_ms
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
 * Releases parked deliveries as requests to their endpoints finish: up to `counts[i]` of endpoint
 * `endpointIds[i]`'s, oldest due first, become pending again and wake the relays. Run in the transaction
 * that records those requests' outcomes, so a release is never lost nor made twice for one request. Cheap
 * when nothing is parked (an empty partial index), so it runs for every batch. SKIP LOCKED: a row locked by
 * another worker's outcome is being settled by it, and waiting here could deadlock with that worker's lock
 * order. Returns how many were released.
 */
export async function unparkDeliveries(db: Queryable, endpointIds: readonly string[], counts: readonly number[]): Promise<number> {
  if (endpointIds.length === 0) return 0;
  const { rows } = await db.query<{ released: number }>(
    prepared(
      `WITH released AS (
       UPDATE deliveries SET state = 'pending'
       WHERE id IN (SELECT parked.id
                    FROM unnest($1::text[], $2::int[]) AS wanted(endpoint_id, n)
                    CROSS JOIN LATERAL (SELECT id FROM deliveries
                                        WHERE state = 'parked' AND endpoint_id = wanted.endpoint_id
                                        ORDER BY due_at, id
                                        LIMIT wanted.n
                                        FOR UPDATE SKIP LOCKED) AS parked)
         AND state = 'parked'
       RETURNING 1
     )
     SELECT count(*)::int AS released, ${wakeRelaysIfAny('released', 'old due times')} AS notified
     FROM released`,
      [endpointIds, counts],
    ),
  );
  return rows[0]?.released ?? 0;
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
 * endpoints are read by a second query, once each (webhookStore.findAttemptTargets).
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

/** The deliveries an outcome batch names, as the state machine needs them; deleted ones are absent. */
export async function readDeliveryFacts(db: Queryable, ids: readonly string[]): Promise<Map<string, DeliveryFacts>> {
  if (ids.length === 0) return new Map();
  const { rows } = await db.query<{ id: string; state: DeliveryState; attempts: number; failure_counted: boolean }>(
    prepared('SELECT id::text AS id, state, attempts, failure_counted FROM deliveries WHERE id = ANY($1::int8[])', [ids]),
  );
  return new Map(rows.map((row) => [row.id, { state: row.state, attempts: row.attempts, failureCounted: row.failure_counted }]));
}

/** What the state machine decided for one outcome: an attempt record to keep, a new row, or both. */
export interface OutcomeWrite {
  readonly deliveryId: string;
  readonly attempt: number;
  readonly record: AttemptRecord | undefined;
  readonly change: DeliveryChange | undefined;
}

/**
 * Writes a batch's decisions in one statement: the attempt records (a redelivered message repeats an
 * attempt whose record may already exist: the first record stands) and the deliveries' new rows. The
 * recorder read the rows under their endpoints' locks; the update's condition is the state machine's own
 * (the delivery still waits for that attempt), repeated so that a row changed by a path that does not
 * take the endpoint's lock is never overwritten. Times travel as epoch milliseconds.
 */
export async function recordOutcomes(db: Queryable, writes: readonly OutcomeWrite[]): Promise<void> {
  if (writes.length === 0) return;
  await db.query(
    prepared(
      `WITH outcome AS (
       SELECT * FROM unnest($1::bigint[], $2::int[], $3::text[], $4::int[], $5::float8[], $6::boolean[],
                            $7::boolean[], $8::float8[], $9::int[], $10::int[], $11::text[], $12::text[])
              AS o(id, attempt, state, attempts, due_ms, completed, wake, attempted_ms, duration_ms, status_code, error, response_excerpt)
     ), recorded AS (
       INSERT INTO delivery_attempts (delivery_id, attempt, attempted_at, duration_ms, status_code, error, response_excerpt)
       SELECT id, attempt, to_timestamp(attempted_ms / 1000), duration_ms, status_code, error, response_excerpt
       FROM outcome
       -- A delivery deleted with its endpoint keeps no attempt records (the endpoint's lock orders this).
       WHERE attempted_ms IS NOT NULL AND EXISTS (SELECT 1 FROM deliveries d WHERE d.id = outcome.id)
       ON CONFLICT (delivery_id, attempt) DO NOTHING
     ), updated AS (
       UPDATE deliveries AS d
       SET state = o.state,
           attempts = o.attempts,
           due_at = COALESCE(to_timestamp(o.due_ms / 1000), d.due_at),
           published_at = NULL,
           completed_at = CASE WHEN o.completed THEN now() END
       FROM outcome o
       WHERE d.id = o.id AND o.state IS NOT NULL AND d.state IN ('pending', 'parked') AND d.attempts = o.attempt - 1
       RETURNING o.wake
     )
     -- A retry scheduled here wakes the relays, which then sleep until it falls due rather than finding it
     -- at their next poll (a poll's rounding would swamp the jitter of a short schedule). Deferrals and
     -- parkings are not attempts and wake nobody. Once per statement, like the fan-out's notification.
     SELECT ${wakeRelaysIfAny('updated WHERE wake')} AS notified`,
      [
        writes.map((write) => write.deliveryId),
        writes.map((write) => write.attempt),
        writes.map((write) => write.change?.state ?? null),
        writes.map((write) => write.change?.attempts ?? null),
        writes.map((write) => write.change?.dueAt?.getTime() ?? null),
        writes.map((write) => write.change?.completed ?? null),
        writes.map((write) => write.change?.wakeRelays ?? null),
        writes.map((write) => write.record?.attemptedAt.getTime() ?? null),
        writes.map((write) => write.record?.durationMs ?? null),
        writes.map((write) => write.record?.statusCode ?? null),
        writes.map((write) => write.record?.error ?? null),
        writes.map((write) => write.record?.responseExcerpt ?? null),
      ],
    ),
  );
}
