import { prepared, type Queryable } from '../db/database.ts';
import type { EnvelopeSource } from '../webhooks/envelope.ts';
import { DELIVERIES_PENDING_CHANNEL } from '../webhooks/fanOut.ts';

/**
 * SQL of the delivery path: the relay's outbox claims, the worker's batched reads of what to send, and its
 * batched writes of what happened. Each function is one statement over arrays, whatever the batch size.
 */

// Ids are bigint; they travel as text (the pool parses int8 as a number, which is exact only to 2^53).
export interface DueDelivery {
  readonly id: string;
  /** The attempt the published message asks for (attempts made so far + 1). */
  readonly attempt: number;
  /** How many times the row has been published, this time included. */
  readonly publication: number;
}

/**
 * Takes up to `limit` due, unpublished deliveries, oldest due first, and marks them published. Marking
 * comes before publishing, and commits first, so a worker that receives the message at once never finds
 * the row still unmarked; a relay that dies before publishing leaves rows that releaseStalePublications
 * makes due again. SKIP LOCKED lets several relays share the outbox.
 */
export async function takeDueDeliveries(db: Queryable, limit: number): Promise<DueDelivery[]> {
  const { rows } = await db.query<{ id: string; attempt: number; publication: number }>(
    prepared(`UPDATE deliveries SET published_at = now(), publications = publications + 1
     WHERE id IN (SELECT id FROM deliveries
                  WHERE state = 'pending' AND published_at IS NULL AND due_at <= now()
                  ORDER BY due_at, id
                  LIMIT $1
                  FOR UPDATE SKIP LOCKED)
     RETURNING id::text AS id, attempts + 1 AS attempt, publications AS publication`,
    [limit]),
  );
  return rows;
}

/** Puts back deliveries whose publication failed, to be taken again at the next pass. */
/**
 * Milliseconds until the earliest waiting delivery falls due (0 when one is due now), measured on the
 * database's clock like due_at itself; undefined when none waits. An index-only look at deliveries_due.
 */
export async function timeUntilNextDue(db: Queryable): Promise<number | undefined> {
  const { rows } = await db.query<{ wait_ms: number | null }>(
    prepared(`SELECT greatest(0, ceil(extract(epoch FROM min(due_at) - now()) * 1000))::int8 AS wait_ms
     FROM deliveries WHERE state = 'pending' AND published_at IS NULL`, []),
  );
  return rows[0]?.wait_ms ?? undefined;
}

export async function unmarkPublished(db: Queryable, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await db.query(`UPDATE deliveries SET published_at = NULL WHERE id = ANY($1::bigint[]) AND state = 'pending'`, [ids]);
}

/**
 * Makes deliveries published long ago due again. Their message should have been consumed by now; if it
 * never reached the stream (a relay died between marking and publishing) or the stream lost it, this is
 * how the delivery still happens. Should the first message turn up after all, the worker's attempt check
 * makes whichever copy comes second harmless.
 */
export async function releaseStalePublications(db: Queryable, olderThanMs: number): Promise<number> {
  const result = await db.query(
    `UPDATE deliveries SET published_at = NULL
     WHERE state = 'pending' AND published_at < now() - make_interval(secs => $1::double precision / 1000)`,
    [olderThanMs],
  );
  return result.rowCount ?? 0;
}

/** Everything a worker needs for one attempt. `envelope` fields come from the stored event. */
export interface DeliveryWork {
  readonly deliveryId: string;
  readonly state: string;
  readonly attempts: number;
  readonly published: boolean;
  readonly endpointId: string;
  readonly endpointActive: boolean;
  readonly url: string;
  readonly secretCiphertext: Buffer;
  readonly event: EnvelopeSource;
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

interface EndpointRow {
  id: string;
  active: boolean;
  url: string;
  secret_ciphertext: Buffer;
  [column: string]: unknown;
}

/**
 * Loads a batch of deliveries with their endpoint and event; ids of deleted deliveries are absent. The
 * endpoints are read by a second query, once each: a batch is mostly deliveries to a few endpoints, and
 * repeating each one's URL and sealed secret on every row was most of the bytes the worker parsed.
 */
export async function loadDeliveryWork(db: Queryable, ids: readonly string[]): Promise<Map<string, DeliveryWork>> {
  const { rows } = await db.query<WorkRow>(
    prepared(`SELECT d.id::text AS delivery_id, d.state, d.attempts, d.published_at IS NOT NULL AS published, d.endpoint_id,
            e.event_id, to_char(e.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS timestamp,
            e.action, e.tenant_id, e.user_id, e.user_role, e.resource_type, e.resource_id, e.phi_involved, e.success, e.details
     FROM deliveries d
     JOIN events e ON e.tenant_id = d.tenant_id AND e.occurred_at = d.event_occurred_at AND e.event_id = d.event_id
     WHERE d.id = ANY($1::bigint[])`,
    [ids]),
  );
  if (rows.length === 0) return new Map();
  const endpointIds = [...new Set(rows.map((row) => row.endpoint_id))];
  const { rows: endpointRows } = await db.query<EndpointRow>(
    prepared('SELECT id, active, url, secret_ciphertext FROM webhook_endpoints WHERE id = ANY($1::text[])', [endpointIds]),
  );
  const endpoints = new Map(endpointRows.map((row) => [row.id, row]));
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
      endpointId: endpoint.id,
      endpointActive: endpoint.active,
      url: endpoint.url,
      secretCiphertext: endpoint.secret_ciphertext,
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

/**
 * Locks the endpoints a batch of outcomes touches, in id order, before any of their deliveries. Disable
 * and delete lock the endpoint first and its deliveries second; taking locks in the same order here is
 * what keeps a worker's outcome write and an API call from deadlocking.
 */
export async function lockEndpoints(db: Queryable, endpointIds: readonly string[]): Promise<void> {
  if (endpointIds.length === 0) return;
  await db.query(prepared('SELECT 1 FROM webhook_endpoints WHERE id = ANY($1::text[]) ORDER BY id FOR NO KEY UPDATE', [[...new Set(endpointIds)].sort()]));
}

export interface AttemptRecord {
  readonly attemptedAt: Date;
  readonly durationMs: number;
  readonly statusCode: number | null;
  readonly error: string | null;
  readonly responseExcerpt: string;
}

export type DeliveryOutcome =
  /** The attempt was made; the delivery is done (succeeded or failed for good) or due again at dueAt. */
  | {
      readonly kind: 'attempted';
      readonly deliveryId: string;
      readonly attempt: number;
      readonly state: 'succeeded' | 'failed' | 'pending';
      readonly dueAt: Date | null;
      readonly record: AttemptRecord;
    }
  /** No attempt was made (the endpoint was saturated); the same attempt is due again at dueAt. */
  | { readonly kind: 'deferred'; readonly deliveryId: string; readonly attempt: number; readonly dueAt: Date }
  /** The endpoint is inactive: nothing more will be attempted. */
  | { readonly kind: 'cancelled'; readonly deliveryId: string; readonly attempt: number };

/**
 * Records a batch of outcomes in one statement: the attempt records (a redelivered message repeats an
 * attempt whose record may already exist: the first record stands; a deleted delivery gets none) and each
 * delivery's new state, applied only if the delivery still waits for exactly that attempt, so a duplicate
 * message cannot count an attempt twice. Returns the ids of the deliveries that changed. Times travel as
 * epoch milliseconds.
 */
export async function recordOutcomes(db: Queryable, outcomes: readonly DeliveryOutcome[]): Promise<Set<string>> {
  if (outcomes.length === 0) return new Set();
  const { rows } = await db.query<{ id: string }>(
    prepared(`WITH outcome AS (
       SELECT * FROM unnest($1::bigint[], $2::int[], $3::text[], $4::float8[], $5::float8[], $6::int[], $7::int[], $8::text[], $9::text[])
              AS o(id, attempt, state, due_ms, attempted_ms, duration_ms, status_code, error, response_excerpt)
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
           attempts = CASE WHEN o.attempted_ms IS NULL THEN o.attempt - 1 ELSE o.attempt END,
           due_at = COALESCE(to_timestamp(o.due_ms / 1000), d.due_at),
           published_at = NULL,
           completed_at = CASE WHEN o.state = 'pending' THEN NULL ELSE now() END
       FROM outcome o
       WHERE d.id = o.id AND d.state = 'pending' AND d.attempts = o.attempt - 1
       RETURNING d.id, o.state, o.attempted_ms
     )
     -- A retry scheduled here wakes the relays, which then sleep until it falls due rather than finding it
     -- at their next poll (a poll's rounding would swamp the jitter of a short schedule). Deferrals are
     -- not attempts and wake nobody. Once per statement, like the fan-out's notification.
     SELECT id::text AS id,
            (SELECT CASE WHEN count(*) > 0 THEN pg_notify($10, '') END
               FROM updated WHERE state = 'pending' AND attempted_ms IS NOT NULL) AS notified
     FROM updated`,
    [
      outcomes.map((outcome) => outcome.deliveryId),
      outcomes.map((outcome) => outcome.attempt),
      outcomes.map((outcome) => (outcome.kind === 'attempted' ? outcome.state : outcome.kind === 'deferred' ? 'pending' : 'cancelled')),
      outcomes.map((outcome) => (outcome.kind === 'cancelled' ? null : (outcome.dueAt?.getTime() ?? null))),
      outcomes.map((outcome) => (outcome.kind === 'attempted' ? outcome.record.attemptedAt.getTime() : null)),
      outcomes.map((outcome) => (outcome.kind === 'attempted' ? outcome.record.durationMs : null)),
      outcomes.map((outcome) => (outcome.kind === 'attempted' ? outcome.record.statusCode : null)),
      outcomes.map((outcome) => (outcome.kind === 'attempted' ? outcome.record.error : null)),
      outcomes.map((outcome) => (outcome.kind === 'attempted' ? outcome.record.responseExcerpt : null)),
      DELIVERIES_PENDING_CHANNEL,
    ]),
  );
  return new Set(rows.map((row) => row.id));
}

export interface EndpointTally {
  readonly endpointId: string;
  /** A success happened in this batch: the count restarts from `failuresAfterLastSuccess`. */
  readonly reset: boolean;
  /** Failed deliveries (terminal) after the batch's last success, or in the whole batch when no success. */
  readonly failuresAfterLastSuccess: number;
  readonly lastAttemptAt: Date;
}

export interface TalliedEndpoint {
  readonly id: string;
  readonly consecutiveFailures: number;
  readonly active: boolean;
}

/** Updates `consecutive_failures` and `last_delivery_at` for the endpoints a batch touched. */
export async function applyEndpointTallies(db: Queryable, tallies: readonly EndpointTally[]): Promise<TalliedEndpoint[]> {
  if (tallies.length === 0) return [];
  const { rows } = await db.query<{ id: string; consecutive_failures: number; active: boolean }>(
    prepared(`UPDATE webhook_endpoints AS w
     SET consecutive_failures = CASE WHEN t.reset THEN t.failures ELSE w.consecutive_failures + t.failures END,
         last_delivery_at = GREATEST(w.last_delivery_at, t.last_attempt_at)
     FROM unnest($1::text[], $2::boolean[], $3::int[], $4::timestamptz[]) AS t(id, reset, failures, last_attempt_at)
     WHERE w.id = t.id
     RETURNING w.id, w.consecutive_failures, w.active`,
    [
      tallies.map((tally) => tally.endpointId),
      tallies.map((tally) => tally.reset),
      tallies.map((tally) => tally.failuresAfterLastSuccess),
      tallies.map((tally) => tally.lastAttemptAt.toISOString()),
    ]),
  );
  return rows.map((row) => ({ id: row.id, consecutiveFailures: row.consecutive_failures, active: row.active }));
}
