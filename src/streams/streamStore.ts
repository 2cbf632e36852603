import type pg from 'pg';
import { prepared, type Queryable } from '../db/database.ts';
import type { OcsfVersion } from './ocsf.ts';
import type { DestinationType, StreamFilter, StreamFormat } from './streamRules.ts';

/** SQL of log streams as the API and the controller change them, and their positions (migration 016); the streams role's leases in streamLeaseStore.ts. */

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
  /** The OCSF release of an `ocsf` stream's records (migration 028); null for `native`. */
  readonly ocsfVersion: OcsfVersion | null;
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

export type StreamRow = {
  id: string;
  owner_tenant_id: string | null;
  tenant_ids: string[] | null;
  destination_type: DestinationType;
  destination: Record<string, unknown>;
  secret_ciphertext: Buffer;
  format: StreamFormat;
  ocsf_version: OcsfVersion | null;
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

export const STREAM_COLUMNS = `id, owner_tenant_id, tenant_ids, destination_type, destination, secret_ciphertext, format, ocsf_version, filter_action_prefixes,
  filter_phi_involved, tree_heads, start_at, paused, failing_since, last_error, last_error_at, last_delivered_at, created_at,
  managed_by, revision`;

export function toStream(row: StreamRow): LogStream {
  return {
    id: row.id,
    ownerTenantId: row.owner_tenant_id,
    tenantIds: row.tenant_ids,
    destinationType: row.destination_type,
    destination: row.destination,
    secretCiphertext: row.secret_ciphertext,
    format: row.format,
    ocsfVersion: row.ocsf_version,
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
  readonly ocsfVersion: OcsfVersion | null;
  readonly filter: StreamFilter;
  readonly treeHeads: boolean;
  /** Undefined: the transaction's now(), so the admin event that records the creation is the stream's first. */
  readonly startAtMs: number | undefined;
  readonly managedBy: string | null;
}

/**
 * The streams role's processes LISTEN here (streamRunner.ts): a stream created, changed or deleted is taken
 * up, restarted or let go at once rather than at the next poll (STREAMS_POLL_MS, a second by default). Sent
 * by every change below, inside its transaction, so it arrives with the commit.
 */
export const STREAMS_CHANGED_CHANNEL = 'audit_log_streams_changed';

async function notifyStreamChanged(client: pg.PoolClient, id: string): Promise<void> {
  await client.query('SELECT pg_notify($1, $2)', [STREAMS_CHANGED_CHANNEL, id]);
}

/** Serialises changes to one tenant's streams (the per-tenant limit); deployment-wide streams lock ''. */
export async function lockTenantStreams(client: pg.PoolClient, tenantId: string): Promise<void> {
  await client.query("SELECT pg_advisory_xact_lock(hashtextextended('log_streams:' || $1, 0))", [tenantId]);
}

/** Inserts the stream unless its owner already has `limit` of them; undefined when it has. */
export async function insertStreamWithinLimit(client: pg.PoolClient, stream: NewStream, limit: number): Promise<LogStream | undefined> {
  const { rows } = await client.query<StreamRow>(
    `INSERT INTO log_streams (id, owner_tenant_id, tenant_ids, destination_type, destination, secret_ciphertext, format,
                              filter_action_prefixes, filter_phi_involved, tree_heads, start_at, managed_by, ocsf_version)
     SELECT $1, $2, $3::text[], $4, $5::jsonb, $6, $7, $8::text[], $9::boolean, $10, COALESCE($11::timestamptz, now()), $12, $14
      WHERE $2::text IS NULL OR (SELECT count(*) FROM log_streams WHERE owner_tenant_id = $2) < $13
     RETURNING ${STREAM_COLUMNS}`,
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
      stream.ocsfVersion,
    ],
  );
  if (rows[0]) await notifyStreamChanged(client, stream.id);
  return rows[0] && toStream(rows[0]);
}

export async function findStream(db: Queryable, id: string, options: { lock?: boolean } = {}): Promise<LogStream | undefined> {
  const { rows } = await db.query<StreamRow>(
    `SELECT ${STREAM_COLUMNS} FROM log_streams WHERE id = $1${options.lock ? ' FOR UPDATE' : ''}`,
    [id],
  );
  return rows[0] && toStream(rows[0]);
}

export async function findManagedStream(db: Queryable, managedBy: string): Promise<LogStream | undefined> {
  const { rows } = await db.query<StreamRow>(`SELECT ${STREAM_COLUMNS} FROM log_streams WHERE managed_by = $1`, [managedBy]);
  return rows[0] && toStream(rows[0]);
}

export async function listTenantStreams(db: Queryable, tenantId: string): Promise<LogStream[]> {
  const { rows } = await db.query<StreamRow>(
    `SELECT ${STREAM_COLUMNS} FROM log_streams WHERE owner_tenant_id = $1 ORDER BY created_at, id`,
    [tenantId],
  );
  return rows.map(toStream);
}

export async function listAllStreams(db: Queryable): Promise<LogStream[]> {
  const { rows } = await db.query<StreamRow>(`SELECT ${STREAM_COLUMNS} FROM log_streams ORDER BY created_at, id`);
  return rows.map(toStream);
}

/** Pauses or resumes; a resume also clears the failing state, so the stream tries its destination at once. */
export async function setPaused(client: pg.PoolClient, id: string, paused: boolean): Promise<LogStream> {
  const { rows } = await client.query<StreamRow>(
    `UPDATE log_streams SET paused = $2, revision = revision + 1, failing_since = CASE WHEN $2 THEN failing_since END
      WHERE id = $1 RETURNING ${STREAM_COLUMNS}`,
    [id, paused],
  );
  await notifyStreamChanged(client, id);
  return toStream(rows[0]!);
}

export interface StreamChanges {
  readonly tenantIds: readonly string[] | null;
  readonly destination: Record<string, unknown>;
  readonly secretCiphertext: Buffer;
  readonly format: StreamFormat;
  readonly ocsfVersion: OcsfVersion | null;
  readonly filter: StreamFilter;
  readonly treeHeads: boolean;
  readonly paused: boolean;
}

/** Applies a resource's spec in place (its position kept); a change of destination clears the failing state. */
export async function updateStream(client: pg.PoolClient, id: string, changes: StreamChanges): Promise<LogStream> {
  const { rows } = await client.query<StreamRow>(
    `UPDATE log_streams
        SET tenant_ids = $2::text[], destination = $3::jsonb, secret_ciphertext = $4, format = $5, filter_action_prefixes = $6::text[],
            filter_phi_involved = $7::boolean, tree_heads = $8, paused = $9, ocsf_version = $10, failing_since = NULL,
            revision = revision + 1
      WHERE id = $1 RETURNING ${STREAM_COLUMNS}`,
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
      changes.ocsfVersion,
    ],
  );
  await notifyStreamChanged(client, id);
  return toStream(rows[0]!);
}

export async function deleteStream(client: pg.PoolClient, id: string): Promise<void> {
  await client.query('DELETE FROM log_streams WHERE id = $1', [id]);
  await notifyStreamChanged(client, id);
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
