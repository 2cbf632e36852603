import type { Queryable } from '../db/database.ts';
import { EVENT_DOCUMENT } from '../events/eventStore.ts';
import { LEAF_OF_EVENT } from '../integrity/treeStore.ts';
import { TILE_HEIGHT, TILE_WIDTH } from '../integrity/tiles.ts';

/** The SQL of redaction (migrations/018_event_redactions.sql). */

export interface RedactionTarget {
  /** Wire form. */
  readonly timestamp: string;
  /** The event as served now. */
  readonly document: string;
  readonly documentVersion: number;
  /** Lowercase hex; undefined while the event waits for its leaf. */
  readonly leafHash: string | undefined;
}

/**
 * The tenant's event of this id (the newest, as the lookup serves, should a producer have reused the id),
 * locked until the transaction ends, so that two redactions of one event apply one after the other; with
 * its leaf hash as the tree holds it (the leaf-level tile's entry), not as the writer claimed it.
 */
export async function lockEventForRedaction(db: Queryable, tenantId: string, eventId: string): Promise<RedactionTarget | undefined> {
  const { rows } = await db.query<{
    timestamp: string;
    document: string;
    document_version: number;
    tile: Buffer | null;
    slot: number | null;
  }>(
    `SELECT to_char(e.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS timestamp, ${EVENT_DOCUMENT} AS document,
            e.document_version, t.hashes AS tile, (leaf.leaf_index % ${TILE_WIDTH})::int AS slot
       FROM events e
       LEFT JOIN LATERAL (SELECT ${LEAF_OF_EVENT} AS leaf_index) leaf ON true
       LEFT JOIN merkle_tiles t ON t.tenant_id = e.tenant_id AND t.level = 0 AND t.tile_index = leaf.leaf_index >> ${TILE_HEIGHT}
      WHERE e.tenant_id = $1 AND e.event_id = $2::uuid
      ORDER BY e.occurred_at DESC LIMIT 1
        FOR UPDATE OF e`,
    [tenantId, eventId],
  );
  const row = rows[0];
  if (!row) return undefined;
  const hash = row.tile && row.slot !== null ? row.tile.subarray(row.slot * 32, row.slot * 32 + 32) : undefined;
  return {
    timestamp: row.timestamp,
    document: row.document,
    documentVersion: row.document_version,
    leafHash: hash?.length === 32 ? hash.toString('hex') : undefined,
  };
}

export interface RedactionRecord {
  readonly tenantId: string;
  readonly eventId: string;
  readonly timestamp: string;
  readonly fields: readonly string[];
  readonly reference: string;
  readonly redactedAt: string;
  /** The event's served document after this redaction. */
  readonly document: string;
}

/** Records a redaction; the table's trigger applies it to the event, or refuses it whole. */
export async function insertRedaction(db: Queryable, record: RedactionRecord): Promise<void> {
  await db.query(
    `INSERT INTO event_redactions (tenant_id, event_id, occurred_at, fields, reference, redacted_at, document)
     VALUES ($1, $2::uuid, $3::timestamptz, $4::text[], $5, $6::timestamptz, $7)`,
    [record.tenantId, record.eventId, record.timestamp, record.fields, record.reference, record.redactedAt, record.document],
  );
}
