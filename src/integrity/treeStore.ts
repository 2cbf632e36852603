import { prepared, type Queryable } from '../db/database.ts';
import type { SignedTreeHead } from '../client/integrity.ts';
import { TILE_HEIGHT, type Tile, type TileKey } from './tiles.ts';

/** SQL of the stored trees, for the readers (API, export, checks) and the sealer alike. */

export async function loadTiles(db: Queryable, tenantId: string, keys: readonly TileKey[]): Promise<Tile[]> {
  if (keys.length === 0) return [];
  const { rows } = await db.query<{ level: number; tile_index: number; hashes: Buffer }>(
    prepared(
      `SELECT t.level, t.tile_index, t.hashes
         FROM unnest($2::smallint[], $3::bigint[]) AS k(level, tile_index)
         JOIN merkle_tiles t ON t.tenant_id = $1 AND t.level = k.level AND t.tile_index = k.tile_index`,
      [tenantId, keys.map((key) => key.level), keys.map((key) => key.index)],
    ),
  );
  return rows.map((row) => ({ level: row.level, index: row.tile_index, hashes: row.hashes }));
}

type HeadRow = {
  tenant_id: string;
  tree_size: number;
  root_hash: Buffer;
  signed_at_text: string;
  key_id: string;
  signature: Buffer;
};

// The text form gets a name of its own: as "signed_at" it would shadow the column in ORDER BY, which would
// then sort text instead of walking the index.
const HEAD_COLUMNS = `tenant_id, tree_size, root_hash, to_char(signed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS signed_at_text, key_id, signature`;

function toHead(row: HeadRow): SignedTreeHead {
  return {
    tenant_id: row.tenant_id,
    tree_size: row.tree_size,
    root_hash: row.root_hash.toString('hex'),
    timestamp: row.signed_at_text,
    key_id: row.key_id,
    signature: row.signature.toString('base64'),
  };
}

export async function latestTreeHead(db: Queryable, tenantId: string): Promise<SignedTreeHead | undefined> {
  const { rows } = await db.query<HeadRow>(
    prepared(`SELECT ${HEAD_COLUMNS} FROM tree_heads WHERE tenant_id = $1 ORDER BY signed_at DESC LIMIT 1`, [tenantId]),
  );
  return rows[0] && toHead(rows[0]);
}

/** The latest head signed for exactly this size. */
export async function treeHeadOfSize(db: Queryable, tenantId: string, treeSize: number): Promise<SignedTreeHead | undefined> {
  const { rows } = await db.query<HeadRow>(
    prepared(`SELECT ${HEAD_COLUMNS} FROM tree_heads WHERE tenant_id = $1 AND tree_size = $2 ORDER BY signed_at DESC LIMIT 1`, [
      tenantId,
      treeSize,
    ]),
  );
  return rows[0] && toHead(rows[0]);
}

export interface HeadWindow {
  readonly sinceMs?: number;
  readonly untilMs?: number;
  /** Continue after this head (newest first). */
  readonly beforeMs?: number;
}

/** Heads newest first, within [since, until), after the cursor position. */
export async function listTreeHeads(db: Queryable, tenantId: string, window: HeadWindow, limit: number): Promise<SignedTreeHead[]> {
  const { rows } = await db.query<HeadRow>(
    prepared(
      `SELECT ${HEAD_COLUMNS} FROM tree_heads
        WHERE tenant_id = $1
          AND ($2::timestamptz IS NULL OR signed_at >= $2::timestamptz)
          AND ($3::timestamptz IS NULL OR signed_at < $3::timestamptz)
          AND ($4::timestamptz IS NULL OR signed_at < $4::timestamptz)
        ORDER BY signed_at DESC
        LIMIT $5`,
      [tenantId, isoOrNull(window.sinceMs), isoOrNull(window.untilMs), isoOrNull(window.beforeMs), limit],
    ),
  );
  return rows.map(toHead);
}

/** Every head of a tenant, oldest first (the integrity check). */
export async function allTreeHeads(db: Queryable, tenantId: string): Promise<SignedTreeHead[]> {
  const { rows } = await db.query<HeadRow>(`SELECT ${HEAD_COLUMNS} FROM tree_heads WHERE tenant_id = $1 ORDER BY signed_at`, [tenantId]);
  return rows.map(toHead);
}

function isoOrNull(ms: number | undefined): string | null {
  return ms === undefined ? null : new Date(ms).toISOString();
}

/**
 * The leaf of an event's row `e`, as an expression: its range is the one appended from the statement
 * that stored it (same tenant and ingested_at, occurred_at within the bounds; a bulk statement has
 * several), and its place there the position of its id (array_positions: an id a producer reused with
 * another timestamp may be there twice).
 */
export const LEAF_OF_EVENT = `(SELECT r.first_leaf + p.position - 1
     FROM merkle_leaf_ranges r
     CROSS JOIN LATERAL unnest(array_positions(r.event_ids, e.event_id)) AS p(position)
    WHERE r.tenant_id = e.tenant_id AND r.ingested_at = e.ingested_at
      AND r.min_occurred_at <= e.occurred_at AND r.max_occurred_at >= e.occurred_at
      AND r.event_occurred_at[p.position] = e.occurred_at
    LIMIT 1)`;

export interface ProofMaterial {
  /** False when the tenant has no event with this id. */
  readonly eventFound: boolean;
  readonly leafIndex: number | undefined;
  /** The latest head, or the latest of the size asked for; undefined when there is none. */
  readonly head: SignedTreeHead | undefined;
  /** Every tile the event's inclusion proof against that head can need (a few more, at most two a level). */
  readonly tiles: Tile[];
}

/**
 * Everything an inclusion proof needs, in one round trip: the event's leaf, the head, and per tile level the
 * tile of the leaf's ancestor (all its siblings there live in it) and the tree's last tile (the right-edge
 * subtrees). A proof's latency was mostly its three sequential round trips.
 */
export async function proofMaterial(
  db: Queryable,
  tenantId: string,
  eventId: string,
  treeSize: number | undefined,
): Promise<ProofMaterial> {
  const { rows } = await db.query<
    HeadRow & { event_found: boolean; leaf_index: number | null; levels: number[] | null; indexes: number[] | null; tiles: Buffer[] | null }
  >(
    prepared(
      `WITH leaf AS (
         SELECT ${LEAF_OF_EVENT} AS leaf_index FROM events e
          WHERE e.tenant_id = $1 AND e.event_id = $2::uuid ORDER BY e.occurred_at DESC LIMIT 1
       ), head AS (
         SELECT ${HEAD_COLUMNS} FROM tree_heads
          WHERE tenant_id = $1 AND ($3::bigint IS NULL OR tree_size = $3::bigint) ORDER BY signed_at DESC LIMIT 1
       ), wanted AS (
         SELECT DISTINCT b.level::smallint AS level, k.tile_index
           FROM leaf, head, generate_series(0, 15) AS b(level)
          CROSS JOIN LATERAL (VALUES (leaf.leaf_index >> (${TILE_HEIGHT} * (b.level + 1))),
                                     ((head.tree_size >> (${TILE_HEIGHT} * b.level)) >> ${TILE_HEIGHT})) AS k(tile_index)
          WHERE leaf.leaf_index < head.tree_size AND (head.tree_size >> (${TILE_HEIGHT} * b.level)) > 0
       )
       SELECT EXISTS (SELECT 1 FROM leaf) AS event_found, (SELECT leaf_index FROM leaf) AS leaf_index, head.*,
              (SELECT array_agg(t.level) FROM wanted w JOIN merkle_tiles t ON t.tenant_id = $1 AND t.level = w.level AND t.tile_index = w.tile_index) AS levels,
              (SELECT array_agg(t.tile_index) FROM wanted w JOIN merkle_tiles t ON t.tenant_id = $1 AND t.level = w.level AND t.tile_index = w.tile_index) AS indexes,
              (SELECT array_agg(t.hashes) FROM wanted w JOIN merkle_tiles t ON t.tenant_id = $1 AND t.level = w.level AND t.tile_index = w.tile_index) AS tiles
         FROM (SELECT 1) one LEFT JOIN head ON true`,
      [tenantId, eventId, treeSize ?? null],
    ),
  );
  const row = rows[0]!;
  const levels = row.levels ?? [];
  return {
    eventFound: row.event_found,
    leafIndex: row.leaf_index ?? undefined,
    head: row.tenant_id === null || row.tenant_id === undefined ? undefined : toHead(row),
    tiles: levels.map((level, index) => ({ level, index: row.indexes![index]!, hashes: row.tiles![index]! })),
  };
}

/**
 * Leaf indexes of events given by id and wire timestamp; absent from the map when not sealed. (Unnesting
 * each range once for a batch would read fewer arrays, but the planner, which cannot count the rows of
 * a CTE, then unnests every range once per event.)
 */
export async function leafIndexesOf(
  db: Queryable,
  tenantId: string,
  events: ReadonlyArray<{ readonly eventId: string; readonly timestamp: string }>,
): Promise<Map<string, number>> {
  const { rows } = await db.query<{ event_id: string; timestamp: string; leaf_index: number | null }>(
    prepared(
      `SELECT k.event_id::text, k.ts AS timestamp, ${LEAF_OF_EVENT} AS leaf_index
         FROM unnest($2::uuid[], $3::text[]) AS k(event_id, ts)
         JOIN events e ON e.tenant_id = $1 AND e.occurred_at = k.ts::timestamptz AND e.event_id = k.event_id`,
      [tenantId, events.map((event) => event.eventId), events.map((event) => event.timestamp)],
    ),
  );
  return new Map(rows.filter((row) => row.leaf_index !== null).map((row) => [`${row.event_id}@${row.timestamp}`, row.leaf_index!]));
}

export type SealKeyRecord = {
  readonly key_id: string;
  readonly algorithm: 'Ed25519';
  readonly public_key_pem: string;
  readonly valid_from: string;
  readonly valid_until: string | null;
};

const ISO = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

export async function listSealKeys(db: Queryable): Promise<SealKeyRecord[]> {
  const { rows } = await db.query<SealKeyRecord>(
    `SELECT key_id, algorithm, public_key_pem, ${ISO('valid_from')} AS valid_from, ${ISO('valid_until')} AS valid_until
       FROM seal_keys ORDER BY valid_from`,
  );
  return rows;
}

/** The size of each tenant's tree: of the tenants named, or of every tenant with one. */
export async function treeSizes(db: Queryable, tenantIds: readonly string[] | undefined): Promise<Map<string, number>> {
  const { rows } = await db.query<{ tenant_id: string; tree_size: number }>(
    prepared('SELECT tenant_id, tree_size FROM merkle_trees WHERE tree_size > 0 AND ($1::text[] IS NULL OR tenant_id = ANY($1::text[]))', [
      tenantIds ?? null,
    ]),
  );
  return new Map(rows.map((row) => [row.tenant_id, row.tree_size]));
}

/**
 * The first leaf of the first statement ingested at or after `sinceMs`, or holding an event dated at or
 * after it; the tree's size when there is none yet. Producers may date events up to INGEST_MAX_FUTURE_SKEW
 * ahead of their ingestion, far less than the day of statements looked at before `sinceMs`.
 */
export async function firstLeafSince(db: Queryable, tenantId: string, sinceMs: number): Promise<number> {
  const { rows } = await db.query<{ first_leaf: number | null; tree_size: number | null }>(
    prepared(
      `SELECT (SELECT min(first_leaf) FROM merkle_leaf_ranges
                WHERE tenant_id = $1 AND ingested_at >= $2::timestamptz - interval '1 day'
                  AND (ingested_at >= $2::timestamptz OR max_occurred_at >= $2::timestamptz)) AS first_leaf,
              (SELECT tree_size FROM merkle_trees WHERE tenant_id = $1) AS tree_size`,
      [tenantId, new Date(sinceMs).toISOString()],
    ),
  );
  return rows[0]?.first_leaf ?? rows[0]?.tree_size ?? 0;
}

/** When the statement that stored a leaf's event ran: how long the leaf has waited, for a stream's lag. */
export async function leafIngestedAt(db: Queryable, tenantId: string, leafIndex: number): Promise<Date | undefined> {
  const { rows } = await db.query<{ ingested_at: Date }>(
    prepared('SELECT ingested_at FROM merkle_leaf_ranges WHERE tenant_id = $1 AND first_leaf <= $2 ORDER BY first_leaf DESC LIMIT 1', [
      tenantId,
      leafIndex,
    ]),
  );
  return rows[0]?.ingested_at;
}
