import type pg from 'pg';
import { prepared, type Queryable } from '../db/database.ts';
import type { DestinationType, StreamFilter, StreamFormat } from './streamRules.ts';

/** SQL of log streams and their positions (migration 016). */

export interface LogStream {
  readonly id: string;
  /** The tenant managing it through the API; null for a deployment-wide stream. */
  readonly ownerTenantId: string | null;
  /** The tenants it follows; null: all. */
  readonly tenantIds: readonly string[] | null;
  readonly destinationType: DestinationType;
  /** The destination without its secrets. */
  readonly destination: Record<string, unknown>;
  readonly secretCiphertext: Buffer;
  readonly format: StreamFormat;
  readonly filter: StreamFilter;
  readonly treeHeads: boolean;
  readonly startAt: Date;
  readonly paused: boolean;
  readonly failingSince: Date | null;
  readonly lastError: string | null;
  readonly lastErrorAt: Date | null;
  readonly lastDeliveredAt: Date | null;
  readonly createdAt: Date;
  readonly managedBy: string | null;
  readonly revision: number;
}

type StreamRow = {
  id: string;
  owner_tenant_id: string | null;
  tenant_ids: string[] | null;
  destination_type: DestinationType;
  destination: Record<string, unknown>;
  secret_ciphertext: Buffer;
  format: StreamFormat;
  filter_action_prefixes: string[];
  filter_phi_involved: boolean | null;
  tree_heads: boolean;
  start_at: Date;
  paused: boolean;
  failing_since: Date | null;
  last_error: string | null;
  last_error_at: Date | null;
  last_delivered_at: Date | null;
  created_at: Date;
  managed_by: string | null;
  revision: number;
};

const COLUMNS = `id, owner_tenant_id, tenant_ids, destination_type, destination, secret_ciphertext, format, filter_action_prefixes,
  filter_phi_involved, tree_heads, start_at, paused, failing_since, last_error, last_error_at, last_delivered_at, created_at,
  managed_by, revision`;

function toStream(row: StreamRow): LogStream {
  return {
    id: row.id,
    ownerTenantId: row.owner_tenant_id,
    tenantIds: row.tenant_ids,
    destinationType: row.destination_type,
    destination: row.destination,
    secretCiphertext: row.secret_ciphertext,
    format: row.format,
    filter: {
      ...(row.filter_action_prefixes.length > 0 ? { action_prefixes: row.filter_action_prefixes } : {}),
      ...(row.filter_phi_involved === null ? {} : { phi_involved: row.filter_phi_involved }),
    },
    treeHeads: row.tree_heads,
    startAt: row.start_at,
    paused: row.paused,
    failingSince: row.failing_since,
    lastError: row.last_error,
    lastErrorAt: row.last_error_at,
    lastDeliveredAt: row.last_delivered_at,
    createdAt: row.created_at,
    managedBy: row.managed_by,
    revision: row.revision,
  };
}

export interface NewStream {
  readonly id: string;
  readonly ownerTenantId: string | null;
  readonly tenantIds: readonly string[] | null;
  readonly destinationType: DestinationType;
  readonly destination: Record<string, unknown>;
  readonly secretCiphertext: Buffer;
  readonly format: StreamFormat;
  readonly filter: StreamFilter;
  readonly treeHeads: boolean;
  /** Undefined: the transaction's now(), so the admin event that records the creation is the stream's first. */
  readonly startAtMs: number | undefined;
  readonly managedBy: string | null;
}

/** Serialises changes to one tenant's streams (the per-tenant limit); deployment-wide streams lock ''. */
export async function lockTenantStreams(client: pg.PoolClient, tenantId: string): Promise<void> {
  await client.query("SELECT pg_advisory_xact_lock(hashtextextended('log_streams:' || $1, 0))", [tenantId]);
}

/** Inserts the stream unless its owner already has `limit` of them; undefined when it has. */
export async function insertStreamWithinLimit(client: pg.PoolClient, stream: NewStream, limit: number): Promise<LogStream | undefined> {
  const { rows } = await client.query<StreamRow>(
    `INSERT INTO log_streams (id, owner_tenant_id, tenant_ids, destination_type, destination, secret_ciphertext, format,
                              filter_action_prefixes, filter_phi_involved, tree_heads, start_at, managed_by)
     SELECT $1, $2, $3::text[], $4, $5::jsonb, $6, $7, $8::text[], $9::boolean, $10, COALESCE($11::timestamptz, now()), $12
      WHERE $2::text IS NULL OR (SELECT count(*) FROM log_streams WHERE owner_tenant_id = $2) < $13
     RETURNING ${COLUMNS}`,
    [
      stream.id,
      stream.ownerTenantId,
      stream.tenantIds,
      stream.destinationType,
      JSON.stringify(stream.destination),
      stream.secretCiphertext,
      stream.format,
      stream.filter.action_prefixes ?? [],
      stream.filter.phi_involved ?? null,
      stream.treeHeads,
      stream.startAtMs === undefined ? null : new Date(stream.startAtMs).toISOString(),
      stream.managedBy,
      limit,
    ],
  );
  return rows[0] && toStream(rows[0]);
}

export async function findStream(db: Queryable, id: string, options: { lock?: boolean } = {}): Promise<LogStream | undefined> {
  const { rows } = await db.query<StreamRow>(`SELECT ${COLUMNS} FROM log_streams WHERE id = $1${options.lock ? ' FOR UPDATE' : ''}`, [id]);
  return rows[0] && toStream(rows[0]);
}

export async function findManagedStream(db: Queryable, managedBy: string): Promise<LogStream | undefined> {
  const { rows } = await db.query<StreamRow>(`SELECT ${COLUMNS} FROM log_streams WHERE managed_by = $1`, [managedBy]);
  return rows[0] && toStream(rows[0]);
}

export async function listTenantStreams(db: Queryable, tenantId: string): Promise<LogStream[]> {
  const { rows } = await db.query<StreamRow>(`SELECT ${COLUMNS} FROM log_streams WHERE owner_tenant_id = $1 ORDER BY created_at, id`, [
    tenantId,
  ]);
  return rows.map(toStream);
}

export async function listAllStreams(db: Queryable): Promise<LogStream[]> {
  const { rows } = await db.query<StreamRow>(`SELECT ${COLUMNS} FROM log_streams ORDER BY created_at, id`);
  return rows.map(toStream);
}

/** Pauses or resumes; a resume also clears the failing state, so the stream tries its destination at once. */
export async function setPaused(client: pg.PoolClient, id: string, paused: boolean): Promise<LogStream> {
  const { rows } = await client.query<StreamRow>(
    `UPDATE log_streams SET paused = $2, revision = revision + 1, failing_since = CASE WHEN $2 THEN failing_since END
      WHERE id = $1 RETURNING ${COLUMNS}`,
    [id, paused],
  );
  return toStream(rows[0]!);
}

export interface StreamChanges {
  readonly tenantIds: readonly string[] | null;
  readonly destination: Record<string, unknown>;
  readonly secretCiphertext: Buffer;
  readonly format: StreamFormat;
  readonly filter: StreamFilter;
  readonly treeHeads: boolean;
  readonly paused: boolean;
}

/** Applies a resource's spec in place (its position kept); a change of destination clears the failing state. */
export async function updateStream(client: pg.PoolClient, id: string, changes: StreamChanges): Promise<LogStream> {
  const { rows } = await client.query<StreamRow>(
    `UPDATE log_streams
        SET tenant_ids = $2::text[], destination = $3::jsonb, secret_ciphertext = $4, format = $5, filter_action_prefixes = $6::text[],
            filter_phi_involved = $7::boolean, tree_heads = $8, paused = $9, failing_since = NULL, revision = revision + 1
      WHERE id = $1 RETURNING ${COLUMNS}`,
    [
      id,
      changes.tenantIds,
      JSON.stringify(changes.destination),
      changes.secretCiphertext,
      changes.format,
      changes.filter.action_prefixes ?? [],
      changes.filter.phi_involved ?? null,
      changes.treeHeads,
      changes.paused,
    ],
  );
  return toStream(rows[0]!);
}

export async function deleteStream(client: pg.PoolClient, id: string): Promise<void> {
  await client.query('DELETE FROM log_streams WHERE id = $1', [id]);
}

export interface StreamPosition {
  readonly tenantId: string;
  readonly nextLeaf: number;
  readonly deliveredEvents: number;
}

export async function streamPositions(db: Queryable, streamId: string): Promise<StreamPosition[]> {
  const { rows } = await db.query<{ tenant_id: string; next_leaf: number; delivered_events: number }>(
    prepared('SELECT tenant_id, next_leaf, delivered_events FROM log_stream_positions WHERE stream_id = $1', [streamId]),
  );
  return rows.map((row) => ({ tenantId: row.tenant_id, nextLeaf: Number(row.next_leaf), deliveredEvents: Number(row.delivered_events) }));
}

// --- The streams role: leases, positions, outcomes. Every write is guarded by the lease, so a process
// that lost a stream (paused too long in a GC, cut off from Postgres) cannot move its position.

/**
 * Takes, or keeps, the streams this process may deliver: renews the leases it holds (waiting for a row its
 * own worker has locked, rather than skipping it, which would look like losing the stream), and takes as
 * many of the streams whose lease ran out as `capacity` leaves room for, oldest first, skipping those
 * another process is taking at the same moment. Paused streams are let go. Returns the streams held.
 */
export async function claimStreams(db: Queryable, owner: string, leaseMs: number, capacity: number): Promise<LogStream[]> {
  const returned = COLUMNS.split(',')
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

/** Records a failed batch: its reason, and for a refusal that does not heal, the failing state. */
export async function recordFailure(db: Queryable, streamId: string, owner: string, reason: string, failing: boolean): Promise<void> {
  await db.query(
    prepared(
      `UPDATE log_streams SET last_error = $3, last_error_at = now(),
              failing_since = CASE WHEN $4 THEN COALESCE(failing_since, now()) ELSE failing_since END
        WHERE id = $1 AND lease_owner = $2`,
      [streamId, owner, reason.slice(0, 1000), failing],
    ),
  );
}

/** Where the stream starts in a tenant's trail, fixed the first time it meets the tenant; the position held. */
export async function startPosition(db: Queryable, streamId: string, tenantId: string, nextLeaf: number): Promise<number> {
  const { rows } = await db.query<{ next_leaf: string }>(
    prepared(
      `WITH inserted AS (
         INSERT INTO log_stream_positions (stream_id, tenant_id, next_leaf) VALUES ($1, $2, $3)
         ON CONFLICT (stream_id, tenant_id) DO NOTHING RETURNING next_leaf
       )
       SELECT next_leaf FROM inserted UNION ALL SELECT next_leaf FROM log_stream_positions WHERE stream_id = $1 AND tenant_id = $2`,
      [streamId, tenantId, nextLeaf],
    ),
  );
  return Number(rows[0]!.next_leaf);
}
