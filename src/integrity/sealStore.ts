import type pg from 'pg';
import { prepared, type Queryable } from '../db/database.ts';
import type { SignedTreeHead } from '../client/integrity.ts';
import type { Tile } from './tiles.ts';

/**
 * SQL of sealing: the tree's state row (the per-tenant lock), appending leaves, heads, keys. What waits to be
 * sealed, the queue, is sealQueueStore.ts.
 */

/** Tenants with events waiting, and tenants whose latest head is older than the heartbeat. */
export async function tenantsToSeal(db: Queryable, heartbeatMs: number): Promise<string[]> {
  const { rows } = await db.query<{ tenant_id: string }>(
    `SELECT DISTINCT tenant_id FROM seal_queue
     UNION
     SELECT tenant_id FROM merkle_trees
      WHERE tree_size > 0 AND (last_head_at < clock_timestamp() - $1 * interval '1 millisecond' OR checkpoint_origin IS NULL)`,
    [heartbeatMs],
  );
  return rows.map((row) => row.tenant_id);
}

/** Every tenant with a tree (the fork guard's check at start). */
export async function tenantsWithTrees(db: Queryable): Promise<string[]> {
  const { rows } = await db.query<{ tenant_id: string }>('SELECT tenant_id FROM merkle_trees WHERE tree_size > 0 ORDER BY tenant_id');
  return rows.map((row) => row.tenant_id);
}

export interface TreeState {
  readonly size: number;
  readonly root: Buffer | undefined;
  readonly lastHeadAtMs: number | undefined;
  /** The database's clock, in milliseconds: heads are dated by it, as key validity windows are. */
  readonly nowMs: number;
  /** Whether the sealer's key may still sign (a newer key retires it). */
  readonly keyCurrent: boolean;
  /** The log's checkpoint origin, fixed by its first checkpoint; undefined before (migration 030). */
  readonly checkpointOrigin: string | undefined;
}

/**
 * Locks the tenant's tree for this transaction, or returns undefined when another sealer holds it (the
 * caller moves on; that sealer will do the work). The key row is share-locked, so a newer key cannot
 * retire this one until the heads signed with it are committed.
 */
export async function lockTree(client: pg.PoolClient, tenantId: string, keyId: string): Promise<TreeState | undefined> {
  await client.query(prepared('INSERT INTO merkle_trees (tenant_id) VALUES ($1) ON CONFLICT (tenant_id) DO NOTHING', [tenantId]));
  const { rows } = await client.query<{
    tree_size: number;
    root_hash: Buffer | null;
    last_head_ms: number | null;
    now_ms: number;
    key_current: boolean | null;
    checkpoint_origin: string | null;
  }>(
    prepared(
      `SELECT tree_size, root_hash, checkpoint_origin,
              (extract(epoch FROM last_head_at) * 1000)::int8 AS last_head_ms,
              (extract(epoch FROM date_trunc('milliseconds', clock_timestamp())) * 1000)::int8 AS now_ms,
              (SELECT valid_until IS NULL FROM seal_keys WHERE key_id = $2 FOR SHARE) AS key_current
         FROM merkle_trees WHERE tenant_id = $1
         FOR UPDATE SKIP LOCKED`,
      [tenantId, keyId],
    ),
  );
  const row = rows[0];
  if (!row) return undefined;
  return {
    size: row.tree_size,
    root: row.root_hash ?? undefined,
    lastHeadAtMs: row.last_head_ms ?? undefined,
    nowMs: row.now_ms,
    keyCurrent: row.key_current === true,
    checkpointOrigin: row.checkpoint_origin ?? undefined,
  };
}

/** Leaves from firstLeaf on: the events of one queue row, or (partial) those of them still in the store. */
export interface LeafRange {
  readonly queueId: number;
  readonly firstLeaf: number;
  readonly partial: boolean;
}

export interface Append {
  readonly tenantId: string;
  readonly ranges: readonly LeafRange[];
  readonly tiles: readonly Tile[];
  /** Every queue row taken, including rows none of whose events remained. */
  readonly queueIds: readonly number[];
  readonly head: SignedTreeHead;
  readonly checkpoint: SignedCheckpoint;
}

/** The checkpoint note signed with a head: the log's origin and the Ed25519 signature of the note. */
export interface SignedCheckpoint {
  readonly origin: string;
  readonly signature: Buffer;
}

/**
 * Live streams (live/liveFeed.ts) LISTEN here: an append's notification, its payload the tenant id,
 * arrives when the append commits, so a stream reads the new leaves at once rather than at its next poll.
 */
export const LEAVES_APPENDED_CHANNEL = 'audit_leaves_appended';

/**
 * The whole append as one statement: the leaf ranges (a queue row's arrays move as they are), the changed
 * tiles, the queue rows taken, the signed head and the tree's new state; then the notification of live
 * streams. Committed with the lock taken by lockTree.
 */
export async function recordAppend(client: pg.PoolClient, append: Append): Promise<void> {
  const { head, tenantId } = append;
  const whole = append.ranges.filter((range) => !range.partial);
  const tileStarts: number[] = [];
  let start = 0;
  for (const tile of append.tiles) {
    tileStarts.push(start);
    start += tile.hashes.length;
  }
  for (const range of append.ranges) {
    if (!range.partial) continue;
    // Only in a store altered behind the service's back: the range keeps the row's events that remain.
    await client.query(
      `INSERT INTO merkle_leaf_ranges (tenant_id, first_leaf, ingested_at, min_occurred_at, max_occurred_at, event_occurred_at, event_ids)
       SELECT $1, $2, min(q.ingested_at), min(k.occurred_at), max(k.occurred_at),
              array_agg(k.occurred_at ORDER BY k.position), array_agg(k.event_id ORDER BY k.position)
         FROM seal_queue q
        CROSS JOIN LATERAL unnest(q.event_occurred_at, q.event_ids) WITH ORDINALITY AS k(occurred_at, event_id, position)
         JOIN events e ON e.tenant_id = $1 AND e.occurred_at = k.occurred_at AND e.event_id = k.event_id
        WHERE q.tenant_id = $1 AND q.id = $3`,
      [tenantId, range.firstLeaf, range.queueId],
    );
  }
  await client.query(
    prepared(
      `WITH ranges AS (
         INSERT INTO merkle_leaf_ranges (tenant_id, first_leaf, ingested_at, min_occurred_at, max_occurred_at, event_occurred_at, event_ids)
         SELECT $1, r.first_leaf, q.ingested_at, q.min_occurred_at, q.max_occurred_at, q.event_occurred_at, q.event_ids
           FROM unnest($2::bigint[], $3::bigint[]) AS r(queue_id, first_leaf)
           JOIN seal_queue q ON q.tenant_id = $1 AND q.id = r.queue_id
       ), tiles AS (
         -- The tiles' contents arrive as one bytea, each tile from its offset: a bytea[] parameter would
         -- travel as hex text, encoded by the driver and decoded here (hundreds of tiles per append).
         INSERT INTO merkle_tiles (tenant_id, level, tile_index, hashes)
         SELECT $1, t.level, t.tile_index, substring($13::bytea FROM t.start + 1 FOR t.bytes)
           FROM unnest($4::smallint[], $5::bigint[], $6::int[], $7::int[]) AS t(level, tile_index, start, bytes)
         ON CONFLICT (tenant_id, level, tile_index) DO UPDATE SET hashes = excluded.hashes
       ), dequeued AS (
         DELETE FROM seal_queue WHERE tenant_id = $1 AND id = ANY($8::bigint[])
       ), signed AS (
         INSERT INTO tree_heads (tenant_id, signed_at, tree_size, root_hash, key_id, signature, note_signature)
         VALUES ($1, $9::timestamptz, $10, $11, $12, $14, $16)
       )
       UPDATE merkle_trees SET tree_size = $10, root_hash = $11, last_head_at = $9::timestamptz, checkpoint_origin = $15
        WHERE tenant_id = $1`,
      [
        tenantId,
        whole.map((range) => range.queueId),
        whole.map((range) => range.firstLeaf),
        append.tiles.map((tile) => tile.level),
        append.tiles.map((tile) => tile.index),
        tileStarts,
        append.tiles.map((tile) => tile.hashes.length),
        append.queueIds,
        head.timestamp,
        head.tree_size,
        Buffer.from(head.root_hash, 'hex'),
        head.key_id,
        // Buffers go to Postgres in binary.
        Buffer.concat(append.tiles.map((tile) => tile.hashes)),
        Buffer.from(head.signature, 'base64'),
        append.checkpoint.origin,
        append.checkpoint.signature,
      ],
    ),
  );
  await client.query('SELECT pg_notify($1, $2)', [LEAVES_APPENDED_CHANNEL, tenantId]);
}

/** A heartbeat: a new head for the same tree. */
export async function recordHeartbeat(client: pg.PoolClient, head: SignedTreeHead, checkpoint: SignedCheckpoint): Promise<void> {
  await client.query(
    prepared(
      `WITH signed AS (
         INSERT INTO tree_heads (tenant_id, signed_at, tree_size, root_hash, key_id, signature, note_signature)
         VALUES ($1, $2::timestamptz, $3, $4, $5, $6, $8)
       )
       UPDATE merkle_trees SET last_head_at = $2::timestamptz, checkpoint_origin = $7 WHERE tenant_id = $1`,
      [
        head.tenant_id,
        head.timestamp,
        head.tree_size,
        Buffer.from(head.root_hash, 'hex'),
        head.key_id,
        Buffer.from(head.signature, 'base64'),
        checkpoint.origin,
        checkpoint.signature,
      ],
    ),
  );
}

/**
 * Makes this key the one that signs: registers it, and retires the current key if it is another. Refuses
 * (returns the time) when this key was retired before: a retired key never signs again, so that an old
 * replica left running during a rotation cannot take over from the new key.
 */
export async function registerSealKey(
  client: pg.PoolClient,
  keyId: string,
  publicKeyPem: string,
): Promise<{ retiredAt: string | undefined }> {
  await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', ['audit_trail.seal_keys']);
  const { rows } = await client.query<{ valid_until: Date | null }>('SELECT valid_until FROM seal_keys WHERE key_id = $1', [keyId]);
  if (rows[0]?.valid_until) return { retiredAt: rows[0].valid_until.toISOString() };
  if (rows[0]) return { retiredAt: undefined };
  await client.query('UPDATE seal_keys SET valid_until = clock_timestamp() WHERE valid_until IS NULL');
  await client.query('INSERT INTO seal_keys (key_id, public_key_pem, valid_from) VALUES ($1, $2, clock_timestamp())', [
    keyId,
    publicKeyPem,
  ]);
  return { retiredAt: undefined };
}
