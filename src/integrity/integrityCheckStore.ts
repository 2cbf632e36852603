import type pg from 'pg';
import type { Database } from '../db/database.ts';
import { COMPACT_DOCUMENT, COMPACT_KEYS_MATCH, EVENT_JSON } from '../events/eventDocument.ts';
import type { Tile } from './tiles.ts';

/*
 * The reads of `audit-trail integrity check` (integrityCheck.ts): the stored tree, its leaves beside the
 * events they name, and the events still without a leaf. Each runs in the check's read-only snapshot.
 */

export async function tenantsWithTrails(db: Database): Promise<string[]> {
  const { rows } = await db.query<{ tenant_id: string }>(
    'SELECT tenant_id FROM merkle_trees UNION SELECT DISTINCT tenant_id FROM events ORDER BY 1',
  );
  return rows.map((row) => row.tenant_id);
}

export async function storedTreeSize(client: pg.PoolClient, tenantId: string): Promise<number> {
  const { rows } = await client.query<{ tree_size: number }>('SELECT tree_size FROM merkle_trees WHERE tenant_id = $1', [tenantId]);
  return rows[0]?.tree_size ?? 0;
}

/** Tiles above the leaf level: a few per million leaves, held in memory for the whole check. */
export async function upperTiles(client: pg.PoolClient, tenantId: string): Promise<Tile[]> {
  const { rows } = await client.query<{ level: number; tile_index: number; hashes: Buffer }>(
    'SELECT level, tile_index, hashes FROM merkle_tiles WHERE tenant_id = $1 AND level > 0',
    [tenantId],
  );
  return rows.map((row) => ({ level: row.level, index: row.tile_index, hashes: row.hashes }));
}

interface LeafRow {
  leaf_index: number;
  event_id: string;
  occurred_at: string;
  /** The stored document, or a compact row's values with their names put back (migration 026). */
  document: string | null;
  /** A full row's columns rendered as a version-1 document (what EVENT_JSON renders). */
  rendered: string | null;
  /** For a compact row, whether the key columns it keeps beside its values hold the same values. */
  keys_match: boolean | null;
  document_version: number | null;
  /** Whether the month partition the event belongs to still exists. */
  partition_exists: boolean;
  /** Whether a redaction record (event_redactions) produced the stored document. */
  redaction_recorded: boolean;
  /** Whether the event was removed by expiry (expired_events, migration 021). */
  expired: boolean;
}

/** The leaves of [from, to) in order, each with its event as stored and as its columns render it (absent when deleted). */
export async function leavesBetween(client: pg.PoolClient, tenantId: string, from: number, to: number): Promise<LeafRow[]> {
  const { rows } = await client.query<LeafRow>(
    `SELECT l.leaf_index, l.event_id::text, to_char(l.event_occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS occurred_at,
            ${COMPACT_DOCUMENT} AS document,
            CASE WHEN e.event_id IS NOT NULL THEN ${EVENT_JSON} END AS rendered,
            CASE WHEN e.document_values IS NOT NULL THEN ${COMPACT_KEYS_MATCH} END AS keys_match, e.document_version,
            to_regclass('events_' || to_char(l.event_occurred_at AT TIME ZONE 'UTC', 'YYYY_MM')) IS NOT NULL AS partition_exists,
            EXISTS (SELECT 1 FROM event_redactions x WHERE x.tenant_id = l.tenant_id AND x.event_id = l.event_id
                       AND x.occurred_at = l.event_occurred_at AND x.document = e.document) AS redaction_recorded,
            e.event_id IS NULL AND gone.event_id IS NOT NULL AS expired
       FROM (SELECT r.tenant_id, r.first_leaf + k.position - 1 AS leaf_index, k.event_occurred_at, k.event_id
               FROM merkle_leaf_ranges r
               CROSS JOIN LATERAL unnest(r.event_occurred_at, r.event_ids) WITH ORDINALITY AS k(event_occurred_at, event_id, position)
               -- A range holds at most 5,000 leaves: the first bound lets the primary key find the ranges.
              WHERE r.tenant_id = $1 AND r.first_leaf > $2 - 5000 AND r.first_leaf < $3) l
       LEFT JOIN events e ON e.tenant_id = l.tenant_id AND e.occurred_at = l.event_occurred_at AND e.event_id = l.event_id
       LEFT JOIN expired_events gone ON gone.tenant_id = l.tenant_id AND gone.event_id = l.event_id
      WHERE l.leaf_index >= $2 AND l.leaf_index < $3
      ORDER BY l.leaf_index`,
    [tenantId, from, to],
  );
  return rows;
}

interface UnsealedRow {
  readonly event_id: string;
  readonly occurred_at: string;
  /** When it was queued for sealing; null when it never was. */
  readonly enqueued_at: string | null;
  readonly overdue: boolean;
}

/** Events with no leaf that are not queued, or have waited in the queue longer than `sealIntervalMs`. */
export async function unsealedEvents(client: pg.PoolClient, tenantId: string, sealIntervalMs: number): Promise<UnsealedRow[]> {
  const { rows } = await client.query<UnsealedRow & pg.QueryResultRow>(
    `WITH queued AS (
       SELECT k.event_id, k.occurred_at, q.enqueued_at
         FROM seal_queue q CROSS JOIN LATERAL unnest(q.event_ids, q.event_occurred_at) AS k(event_id, occurred_at)
        WHERE q.tenant_id = $1
     ), sealed AS (
       SELECT k.event_id, k.occurred_at
         FROM merkle_leaf_ranges r CROSS JOIN LATERAL unnest(r.event_ids, r.event_occurred_at) AS k(event_id, occurred_at)
        WHERE r.tenant_id = $1
     )
     SELECT e.event_id::text, to_char(e.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS occurred_at,
            to_char(queued.enqueued_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS enqueued_at,
            queued.enqueued_at < clock_timestamp() - $2 * interval '1 millisecond' AS overdue
       FROM events e
       LEFT JOIN queued ON queued.event_id = e.event_id AND queued.occurred_at = e.occurred_at
      WHERE e.tenant_id = $1
        AND NOT EXISTS (SELECT 1 FROM sealed WHERE sealed.event_id = e.event_id AND sealed.occurred_at = e.occurred_at)
        AND (queued.event_id IS NULL OR queued.enqueued_at < clock_timestamp() - $2 * interval '1 millisecond')
      ORDER BY e.occurred_at, e.event_id`,
    [tenantId, sealIntervalMs],
  );
  return rows;
}
