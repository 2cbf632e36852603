import type pg from 'pg';
import { eventLeafHash, verifyTreeHead, type SignedTreeHead } from '../client/integrity.ts';
import type { Database } from '../db/database.ts';
import { TILE_HEIGHT, TILE_WIDTH, TileSet, tileRoot, tilesForRanges, type Tile } from './tiles.ts';
import { allTreeHeads, listSealKeys, loadTiles } from './treeStore.ts';
import { redactedLeafVerdict } from './redactedLeaf.ts';
import { recordedForks } from './treeForkStore.ts';
import { leavesBetween, storedTreeSize, tenantsWithTrails, unsealedEvents, upperTiles } from './integrityCheckStore.ts';

/** One finding of the server-side audit; `eventId` names the event when there is one to name. */
interface IntegrityProblem {
  readonly tenantId: string;
  readonly kind:
    | 'leaf_mismatch'
    | 'columns_mismatch'
    | 'event_missing'
    | 'leaf_missing'
    | 'unsealed_overdue'
    | 'tree_corrupt'
    | 'head_invalid'
    | 'head_conflict'
    | 'tree_forked';
  readonly eventId?: string;
  readonly leafIndex?: number;
  readonly message: string;
}

export interface TenantReport {
  readonly tenantId: string;
  readonly leaves: number;
  readonly heads: number;
  /** Leaves whose event is gone with a dropped month partition: retention, not tampering. */
  readonly retained: number;
  /** Redacted events: position and leaf proven, content not re-verifiable (docs/retention.md). */
  readonly redacted: Array<{ eventId: string; leafIndex: number }>;
  /** Leaves whose event expired (its period over, unheld), recorded by the expiry: not tampering. */
  readonly expired: number;
  readonly problems: IntegrityProblem[];
}

/**
 * `audit-trail integrity check`: recomputes every leaf from the stored rows as the API would serve them,
 * compares each row's columns with its stored document, recomputes the tree from its tiles up to every
 * signed head, verifies every head's signature and key window, and finds events with no leaf (never
 * queued) or waiting longer than SEAL_INTERVAL. Each tenant is read in one snapshot.
 */
export async function checkIntegrity(db: Database, options: { tenantId?: string; sealIntervalMs: number }): Promise<TenantReport[]> {
  const tenants = options.tenantId ? [options.tenantId] : await tenantsWithTrails(db);
  const reports: TenantReport[] = [];
  for (const tenantId of tenants) {
    const client = await db.connect();
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      reports.push(await checkTenant(client, tenantId, options.sealIntervalMs));
      await client.query('ROLLBACK');
      client.release();
    } catch (error) {
      client.release(error as Error);
      throw error;
    }
  }
  return reports;
}

async function checkTenant(client: pg.PoolClient, tenantId: string, sealIntervalMs: number): Promise<TenantReport> {
  const problems: IntegrityProblem[] = [];
  const report = (problem: Omit<IntegrityProblem, 'tenantId'>) => problems.push({ tenantId, ...problem });
  const treeSize = await storedTreeSize(client, tenantId);
  const upper = new TileSet(await upperTiles(client, tenantId));
  const { leaves, retained, redacted, expired } = await checkLeaves(client, tenantId, treeSize, upper, report);
  const heads = await allTreeHeads(client, tenantId);
  await checkHeads(client, tenantId, heads, upper, treeSize, report);
  await checkUnsealed(client, tenantId, sealIntervalMs, report);
  // What the sealer's fork guard found (integrity/forkGuard.ts): it signs nothing more for this tenant.
  for (const fork of await recordedForks(client, [tenantId])) {
    report({
      kind: 'tree_forked',
      message:
        `${fork.detected_at}: the sealer stopped sealing: ${fork.reason} (signed head of ${fork.signed_size} leaves, database tree of ` +
        `${fork.database_size}); see docs/integrity.md, The fork guard`,
    });
  }
  return { tenantId, leaves, heads: heads.length, retained, redacted, expired, problems };
}

/** Leaves read per round, a whole number of leaf-level tiles. */
const LEAVES_PER_ROUND = 1600 * TILE_WIDTH;

/**
 * Walks the leaves in order beside the leaf-level tiles: each leaf's event must exist and hash to the
 * tile's entry, and each full tile's root must be the entry above it.
 */
async function checkLeaves(
  client: pg.PoolClient,
  tenantId: string,
  treeSize: number,
  upper: TileSet,
  report: (problem: Omit<IntegrityProblem, 'tenantId'>) => void,
): Promise<{ leaves: number; retained: number; expired: number; redacted: Array<{ eventId: string; leafIndex: number }> }> {
  let expected = 0;
  let retained = 0;
  const redacted: Array<{ eventId: string; leafIndex: number }> = [];
  let expired = 0;
  for (let from = 0; ; from += LEAVES_PER_ROUND) {
    const rows = await leavesBetween(client, tenantId, from, from + LEAVES_PER_ROUND);
    if (rows.length === 0 && from >= treeSize) break;
    const firstTile = from / TILE_WIDTH;
    const tiles = await loadTiles(
      client,
      tenantId,
      Array.from({ length: LEAVES_PER_ROUND / TILE_WIDTH }, (_, i) => ({ level: 0, index: firstTile + i })),
    );
    for (const tile of tiles) checkTileRoot(tile, upper, report);
    const leafTiles = new TileSet(tiles);
    for (const row of rows) {
      if (row.leaf_index !== expected) {
        report({
          kind: 'tree_corrupt',
          leafIndex: expected,
          message: `leaves ${expected} to ${row.leaf_index - 1} have no event recorded`,
        });
      }
      expected = row.leaf_index + 1;
      const event = { eventId: row.event_id, leafIndex: row.leaf_index };
      const served = row.document ?? row.rendered;
      if (served === null) {
        if (row.expired) {
          expired += 1;
          continue;
        }
        if (!row.partition_exists) {
          retained += 1;
          continue;
        }
        report({
          kind: 'event_missing',
          ...event,
          message: `event ${row.event_id} (leaf ${row.leaf_index}, ${row.occurred_at}) is missing from the store`,
        });
        continue;
      }
      let stored: string;
      try {
        stored = leafTiles.leafHash(row.leaf_index).toString('hex');
      } catch {
        report({ kind: 'tree_corrupt', ...event, message: `leaf ${row.leaf_index} has no hash in the tree` });
        continue;
      }
      const redaction = redactedLeafVerdict(served, stored, row.redaction_recorded);
      if (redaction.redacted ? redaction.problem !== undefined : eventLeafHash(served) !== stored) {
        report({
          kind: 'leaf_mismatch',
          ...event,
          message: `event ${row.event_id} (leaf ${row.leaf_index}): ${(redaction.redacted && redaction.problem) || 'its stored form no longer matches its leaf'}`,
        });
      } else if (redaction.redacted) redacted.push(event);
      // Only a version-1 document can be compared with the columns' version-1 rendering (a redacted one without its redaction member).
      const document = (redaction.redacted && redaction.unredacted) || row.document;
      const columnsDiffer =
        row.keys_match === false || (document !== null && row.rendered !== null && row.document_version === 1 && document !== row.rendered);
      if (columnsDiffer) {
        report({
          kind: 'columns_mismatch',
          ...event,
          message: `event ${row.event_id} (leaf ${row.leaf_index}): its columns no longer match its stored document`,
        });
      }
    }
  }
  if (expected !== treeSize) {
    report({ kind: 'tree_corrupt', message: `the tree has ${treeSize} leaves but ${expected} are recorded` });
  }
  return { leaves: expected, retained, redacted, expired };
}

/** A full tile's root must be the entry it contributed to the level above. */
function checkTileRoot(tile: Tile, upper: TileSet, report: (problem: Omit<IntegrityProblem, 'tenantId'>) => void): void {
  if (tile.hashes.length !== TILE_WIDTH * 32) return;
  const root = tileRoot(tile);
  let above: Buffer;
  try {
    above = upper.nodeHash({ level: TILE_HEIGHT * (tile.level + 1), index: tile.index });
  } catch {
    report({ kind: 'tree_corrupt', message: `tile ${tile.level}/${tile.index} is full but the level above lacks its root` });
    return;
  }
  if (!root.equals(above))
    report({ kind: 'tree_corrupt', message: `tile ${tile.level}/${tile.index} does not hash to its entry in the level above` });
}

/**
 * Every head must verify under a known key within its window, and its root must be the root the stored
 * tree has at its size; two heads of one size must agree, and sizes never shrink.
 */
async function checkHeads(
  client: pg.PoolClient,
  tenantId: string,
  heads: readonly SignedTreeHead[],
  upper: TileSet,
  treeSize: number,
  report: (problem: Omit<IntegrityProblem, 'tenantId'>) => void,
): Promise<void> {
  for (const tile of upper.tiles()) checkTileRoot(tile, upper, report);
  const keys = await listSealKeys(client);
  const rootsBySize = new Map<number, SignedTreeHead>();
  let previous: SignedTreeHead | undefined;
  const describe = (head: SignedTreeHead) => `the tree head of size ${head.tree_size} signed at ${head.timestamp}`;
  for (const head of heads) {
    const signature = verifyTreeHead(head, keys);
    if (!signature.valid) report({ kind: 'head_invalid', message: `${describe(head)}: ${signature.reason}` });
    const earlier = rootsBySize.get(head.tree_size);
    if (earlier && earlier.root_hash !== head.root_hash) {
      report({
        kind: 'head_conflict',
        message: `two different tree heads for size ${head.tree_size}: signed at ${earlier.timestamp} and at ${head.timestamp}`,
      });
    }
    rootsBySize.set(head.tree_size, head);
    if (previous && head.tree_size < previous.tree_size)
      report({ kind: 'head_conflict', message: `${describe(head)} is smaller than the head before it (${previous.tree_size})` });
    previous = head;
    if (head.tree_size > treeSize) {
      report({ kind: 'head_conflict', message: `${describe(head)} is larger than the stored tree (${treeSize})` });
      continue;
    }
    const tiles = new TileSet([
      ...upper.tiles(),
      ...(await loadTiles(
        client,
        tenantId,
        tilesForRanges([{ start: 0, end: head.tree_size }]).filter((key) => key.level === 0),
      )),
    ]);
    let root: string;
    try {
      root = tiles.root(head.tree_size).toString('hex');
    } catch {
      report({ kind: 'tree_corrupt', message: `the stored tree lacks hashes for ${describe(head)}` });
      continue;
    }
    if (root !== head.root_hash)
      report({ kind: 'head_conflict', message: `${describe(head)} does not match the stored tree at that size` });
  }
}

/** Events with no leaf: waiting longer than the interval, or never queued at all. */
async function checkUnsealed(
  client: pg.PoolClient,
  tenantId: string,
  sealIntervalMs: number,
  report: (problem: Omit<IntegrityProblem, 'tenantId'>) => void,
): Promise<void> {
  const rows = await unsealedEvents(client, tenantId, sealIntervalMs);
  for (const row of rows) {
    if (row.enqueued_at === null) {
      report({
        kind: 'leaf_missing',
        eventId: row.event_id,
        message: `event ${row.event_id} (${row.occurred_at}) has no leaf and is not waiting for one`,
      });
    } else {
      report({
        kind: 'unsealed_overdue',
        eventId: row.event_id,
        message: `event ${row.event_id} (${row.occurred_at}) has waited for its leaf since ${row.enqueued_at}, longer than SEAL_INTERVAL`,
      });
    }
  }
}
