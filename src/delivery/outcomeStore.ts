import { booleanArrayLiteral, numberArrayLiteral, textArrayLiteral } from '../db/arrayLiteral.ts';
import { prepared, type Queryable } from '../db/database.ts';
import type { AttemptRecord, DeliveryChange, DeliveryFacts, DeliveryState } from './deliveryStateMachine.ts';
import { wakeRelaysIfAny } from './relayWakeUp.ts';

/**
 * The outcome recorder's SQL on `deliveries` and `delivery_attempts` (outcomeRecorder.ts): what the state
 * machine needs to know of a batch's deliveries, what it decided, and the release of parked deliveries as
 * requests to their endpoints finish. Each function is one statement over arrays, whatever the batch size.
 */

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

/** The deliveries an outcome batch names, as the state machine needs them; deleted ones are absent. */
export async function readDeliveryFacts(db: Queryable, ids: readonly string[]): Promise<Map<string, DeliveryFacts>> {
  if (ids.length === 0) return new Map();
  const { rows } = await db.query<{ id: string; state: DeliveryState; attempts: number; failure_counted: boolean }>(
    prepared('SELECT id::text AS id, state, attempts, failure_counted FROM deliveries WHERE id = ANY($1::int8[])', [
      numberArrayLiteral(ids),
    ]),
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
      // Array literals of our own (db/arrayLiteral.ts): pg's encoding quotes and escapes every element of
      // the twelve arrays, a few µs of the worker per outcome.
      [
        numberArrayLiteral(writes.map((write) => write.deliveryId)),
        numberArrayLiteral(writes.map((write) => write.attempt)),
        textArrayLiteral(writes.map((write) => write.change?.state ?? null)),
        numberArrayLiteral(writes.map((write) => write.change?.attempts ?? null)),
        numberArrayLiteral(writes.map((write) => write.change?.dueAt?.getTime() ?? null)),
        booleanArrayLiteral(writes.map((write) => write.change?.completed ?? null)),
        booleanArrayLiteral(writes.map((write) => write.change?.wakeRelays ?? null)),
        numberArrayLiteral(writes.map((write) => write.record?.attemptedAt.getTime() ?? null)),
        numberArrayLiteral(writes.map((write) => write.record?.durationMs ?? null)),
        numberArrayLiteral(writes.map((write) => write.record?.statusCode ?? null)),
        textArrayLiteral(writes.map((write) => write.record?.error ?? null)),
        textArrayLiteral(writes.map((write) => write.record?.responseExcerpt ?? null)),
      ],
    ),
  );
}
