import { prepared, type Queryable } from '../db/database.ts';
import { STREAM_COLUMNS, toStream, type LogStream, type StreamRow } from './streamStore.ts';

/*
 * SQL of the streams role (migration 016): the leases that say which process delivers a stream, the
 * positions it moves and the failures it records. Every write is guarded by the lease, so a process that
 * lost a stream (paused too long in a GC, cut off from Postgres) cannot move its position.
 */

/**
 * Takes, or keeps, the streams this process may deliver: renews the leases it holds (waiting for a row its
 * own worker has locked, rather than skipping it, which would look like losing the stream), and takes as
 * many of the streams whose lease ran out as `capacity` leaves room for, oldest first, skipping those
 * another process is taking at the same moment. Paused streams are let go. Returns the streams held.
 */
export async function claimStreams(db: Queryable, owner: string, leaseMs: number, capacity: number): Promise<LogStream[]> {
  const returned = STREAM_COLUMNS.split(',')
    .map((column) => `s.${column.trim()}`)
    .join(', ');
  const { rows } = await db.query<StreamRow>(
    prepared(
      `WITH released AS (
         UPDATE log_streams SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = $1 AND paused
       ), renewed AS (
         UPDATE log_streams s SET lease_until = now() + $2 * interval '1 millisecond'
          WHERE s.lease_owner = $1 AND NOT s.paused
         RETURNING ${returned}
       ), free AS (
         SELECT id FROM log_streams
          WHERE NOT paused AND lease_owner IS DISTINCT FROM $1 AND (lease_until IS NULL OR lease_until < now())
          ORDER BY created_at
          LIMIT greatest(0, $3 - (SELECT count(*) FROM log_streams WHERE lease_owner = $1 AND NOT paused))
          FOR UPDATE SKIP LOCKED
       ), taken AS (
         UPDATE log_streams s SET lease_owner = $1, lease_until = now() + $2 * interval '1 millisecond'
           FROM free WHERE s.id = free.id
         RETURNING ${returned}
       )
       SELECT * FROM renewed UNION ALL SELECT * FROM taken`,
      [owner, leaseMs, capacity],
    ),
  );
  return rows.map(toStream);
}

/** Lets this process's streams go (a clean stop): another process takes them over at once. */
export async function releaseStreams(db: Queryable, owner: string): Promise<void> {
  await db.query('UPDATE log_streams SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = $1', [owner]);
}

/**
 * Moves a stream's position in a tenant's trail past a delivered batch, and records the delivery on the
 * stream (a failing stream is failing no more). False when this process no longer holds the stream.
 */
export async function advancePosition(
  db: Queryable,
  streamId: string,
  owner: string,
  tenantId: string,
  nextLeaf: number,
  deliveredEvents: number,
): Promise<boolean> {
  const { rows } = await db.query<{ moved: boolean }>(
    prepared(
      `WITH held AS (
         UPDATE log_streams SET last_delivered_at = CASE WHEN $5 > 0 THEN now() ELSE last_delivered_at END, failing_since = NULL
          WHERE id = $1 AND lease_owner = $2 RETURNING id
       ), moved AS (
         INSERT INTO log_stream_positions (stream_id, tenant_id, next_leaf, delivered_events)
         SELECT $1, $3, $4, $5 FROM held
         ON CONFLICT (stream_id, tenant_id) DO UPDATE
           SET next_leaf = excluded.next_leaf, delivered_events = log_stream_positions.delivered_events + excluded.delivered_events,
               updated_at = now()
           WHERE log_stream_positions.next_leaf <= excluded.next_leaf
         RETURNING 1
       )
       SELECT EXISTS (SELECT 1 FROM moved) AS moved`,
      [streamId, owner, tenantId, nextLeaf, deliveredEvents],
    ),
  );
  return rows[0]?.moved === true;
}

/**
 * Records a failed batch: its reason, and for a refusal that does not heal, the failing state. Only while the
 * stream is at the revision the batch was sent under. A change of the stream (new credentials, a resume)
 * clears its failing state and raises its revision, but the worker of the revision before keeps retrying
 * until the runner stops it; its refusals, recorded, made the stream read as failing again, with the old
 * error, until the new worker's first batch went through, and a controller that reconciled meanwhile showed
 * the resource Stalled until its next resync.
 */
export async function recordFailure(
  db: Queryable,
  stream: { readonly id: string; readonly revision: number },
  owner: string,
  reason: string,
  failing: boolean,
): Promise<void> {
  await db.query(
    prepared(
      `UPDATE log_streams SET last_error = $3, last_error_at = now(),
              failing_since = CASE WHEN $4 THEN COALESCE(failing_since, now()) ELSE failing_since END
        WHERE id = $1 AND lease_owner = $2 AND revision = $5`,
      [stream.id, owner, reason.slice(0, 1000), failing, stream.revision],
    ),
  );
}

/**
 * Where the stream starts in a tenant's trail, fixed the first time it meets the tenant; the position held.
 * Undefined when this process no longer holds the stream (deleted, or taken over): the lease row is locked
 * against a deletion until the position is in, so a stream deleted meanwhile is let go, not a foreign-key error.
 */
export async function startPosition(
  db: Queryable,
  streamId: string,
  owner: string,
  tenantId: string,
  nextLeaf: number,
): Promise<number | undefined> {
  const { rows } = await db.query<{ next_leaf: string }>(
    prepared(
      `WITH held AS (
         SELECT id FROM log_streams WHERE id = $1 AND lease_owner = $4 FOR KEY SHARE
       ), inserted AS (
         INSERT INTO log_stream_positions (stream_id, tenant_id, next_leaf) SELECT id, $2, $3 FROM held
         ON CONFLICT (stream_id, tenant_id) DO NOTHING RETURNING next_leaf
       )
       SELECT next_leaf FROM inserted
       UNION ALL SELECT next_leaf FROM log_stream_positions WHERE stream_id = (SELECT id FROM held) AND tenant_id = $2`,
      [streamId, tenantId, nextLeaf, owner],
    ),
  );
  return rows[0] === undefined ? undefined : Number(rows[0].next_leaf);
}
