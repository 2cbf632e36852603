import { prepared, type Queryable } from '../db/database.ts';
import { EVENT_DOCUMENT } from '../events/eventStore.ts';

/** SQL of the C2SP view of a tenant's log: its latest checkpoint, cosignatures, stored tiles and leaves' documents. */

export interface StoredCheckpoint {
  readonly origin: string;
  readonly treeSize: number;
  readonly rootHash: Buffer;
  readonly noteSignature: Buffer;
  readonly publicKeyPem: string;
  /** The size of the tenant's tree now: tiles are served up to it. */
  readonly currentSize: number;
}

/** The latest head that carries a checkpoint signature (every head since migration 030), with its key. */
export async function latestCheckpoint(db: Queryable, tenantId: string): Promise<StoredCheckpoint | undefined> {
  const { rows } = await db.query<{
    checkpoint_origin: string;
    tree_size: number;
    root_hash: Buffer;
    note_signature: Buffer;
    public_key_pem: string;
    current_size: number;
  }>(
    prepared(
      `SELECT t.checkpoint_origin, h.tree_size, h.root_hash, h.note_signature, k.public_key_pem, t.tree_size AS current_size
         FROM merkle_trees t
         CROSS JOIN LATERAL (SELECT tree_size, root_hash, note_signature, key_id FROM tree_heads
                              WHERE tenant_id = t.tenant_id AND note_signature IS NOT NULL
                              ORDER BY signed_at DESC LIMIT 1) h
         JOIN seal_keys k ON k.key_id = h.key_id
        WHERE t.tenant_id = $1 AND t.checkpoint_origin IS NOT NULL`,
      [tenantId],
    ),
  );
  const row = rows[0];
  return (
    row && {
      origin: row.checkpoint_origin,
      treeSize: Number(row.tree_size),
      rootHash: row.root_hash,
      noteSignature: row.note_signature,
      publicKeyPem: row.public_key_pem,
      currentSize: Number(row.current_size),
    }
  );
}

/** The tenant's checkpointed head of exactly this size and root, if any (a cosignature must be for one). */
export async function hasCheckpointOf(db: Queryable, tenantId: string, treeSize: number, rootHash: Buffer): Promise<boolean> {
  const { rows } = await db.query(
    prepared('SELECT 1 FROM tree_heads WHERE tenant_id = $1 AND tree_size = $2 AND root_hash = $3 AND note_signature IS NOT NULL LIMIT 1', [
      tenantId,
      treeSize,
      rootHash,
    ]),
  );
  return rows.length > 0;
}

/** The current signing key (the one the verifier key names). */
export async function currentSealKeyPem(db: Queryable): Promise<string | undefined> {
  const { rows } = await db.query<{ public_key_pem: string }>('SELECT public_key_pem FROM seal_keys WHERE valid_until IS NULL');
  return rows[0]?.public_key_pem;
}

/** Stored tiles of one level from `first` to `last`, in order; a gap ends the list. */
export async function storedTileRun(db: Queryable, tenantId: string, level: number, first: number, last: number): Promise<Buffer[]> {
  const { rows } = await db.query<{ tile_index: string; hashes: Buffer }>(
    prepared(
      `SELECT tile_index, hashes FROM merkle_tiles
        WHERE tenant_id = $1 AND level = $2 AND tile_index BETWEEN $3 AND $4 ORDER BY tile_index`,
      [tenantId, level, first, last],
    ),
  );
  const run: Buffer[] = [];
  for (const [offset, row] of rows.entries()) {
    if (Number(row.tile_index) !== first + offset) break;
    run.push(row.hashes);
  }
  return run;
}

/** A leaf's event as the bundle tells it: its served document, or why there is none. */
export interface LeafDocument {
  readonly leafIndex: number;
  readonly eventId: string;
  readonly timestamp: string;
  /** The document as the API serves it; undefined when the event is gone. */
  readonly document: string | undefined;
  /** When it is gone because it expired: the expiry's time, policy and source. */
  readonly expired: { readonly expired_at: string; readonly retain: string; readonly source: string } | undefined;
}

const ISO = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** The events of leaves [first, first + count), in leaf order, with their documents. */
export async function leafDocuments(db: Queryable, tenantId: string, first: number, count: number): Promise<LeafDocument[]> {
  const { rows } = await db.query<{
    leaf_index: string;
    event_id: string;
    timestamp: string;
    document: string | null;
    expired_at: string | null;
    retain: string | null;
    source: string | null;
  }>(
    prepared(
      `SELECT l.leaf_index, l.event_id::text AS event_id, ${ISO('l.event_occurred_at')} AS timestamp,
              CASE WHEN e.event_id IS NOT NULL THEN ${EVENT_DOCUMENT} END AS document,
              ${ISO('b.requested_at')} AS expired_at, b.retain, b.source
         FROM (SELECT r.first_leaf + k.position - 1 AS leaf_index, k.event_occurred_at, k.event_id
                 FROM merkle_leaf_ranges r
                 CROSS JOIN LATERAL unnest(r.event_occurred_at, r.event_ids) WITH ORDINALITY AS k(event_occurred_at, event_id, position)
                WHERE r.tenant_id = $1
                  AND r.first_leaf >= (SELECT coalesce(max(first_leaf), 0) FROM merkle_leaf_ranges WHERE tenant_id = $1 AND first_leaf <= $2)
                  AND r.first_leaf < $2 + $3) l
         LEFT JOIN events e ON e.tenant_id = $1 AND e.occurred_at = l.event_occurred_at AND e.event_id = l.event_id
         LEFT JOIN expired_events x ON e.event_id IS NULL AND x.tenant_id = $1 AND x.event_id = l.event_id
         LEFT JOIN expiry_batches b ON b.id = x.batch_id
        WHERE l.leaf_index >= $2 AND l.leaf_index < $2 + $3
        ORDER BY l.leaf_index`,
      [tenantId, first, count],
    ),
  );
  return rows.map((row) => ({
    leafIndex: Number(row.leaf_index),
    eventId: row.event_id,
    timestamp: row.timestamp,
    document: row.document ?? undefined,
    expired: row.expired_at === null ? undefined : { expired_at: row.expired_at, retain: row.retain!, source: row.source! },
  }));
}

export interface Cosignature {
  readonly witnessKey: string;
  readonly signatureLine: string;
}

export async function cosignaturesOf(db: Queryable, tenantId: string, treeSize: number, rootHash: Buffer): Promise<Cosignature[]> {
  const { rows } = await db.query<{ witness_key: string; signature_line: string }>(
    prepared(
      `SELECT witness_key, signature_line FROM checkpoint_cosignatures
        WHERE tenant_id = $1 AND tree_size = $2 AND root_hash = $3 ORDER BY witness_name, witness_key`,
      [tenantId, treeSize, rootHash],
    ),
  );
  return rows.map((row) => ({ witnessKey: row.witness_key, signatureLine: row.signature_line }));
}

export interface NewCosignature {
  readonly tenantId: string;
  readonly treeSize: number;
  readonly rootHash: Buffer;
  readonly witnessName: string;
  readonly witnessKey: string;
  readonly cosignedAtSeconds: number;
  readonly signatureLine: string;
}

/** Keeps a witness's cosignature; a later one by the same key for the same tree replaces it (never one for another root). */
export async function recordCosignature(db: Queryable, cosignature: NewCosignature): Promise<void> {
  await db.query(
    `INSERT INTO checkpoint_cosignatures (tenant_id, tree_size, root_hash, witness_name, witness_key, cosigned_at, signature_line)
     VALUES ($1, $2, $3, $4, $5, to_timestamp($6), $7)
     ON CONFLICT (tenant_id, tree_size, witness_key)
     DO UPDATE SET cosigned_at = excluded.cosigned_at, signature_line = excluded.signature_line, received_at = now()
     WHERE checkpoint_cosignatures.root_hash = excluded.root_hash`,
    [
      cosignature.tenantId,
      cosignature.treeSize,
      cosignature.rootHash,
      cosignature.witnessName,
      cosignature.witnessKey,
      cosignature.cosignedAtSeconds,
      cosignature.signatureLine,
    ],
  );
}
