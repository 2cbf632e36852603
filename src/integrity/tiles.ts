import { hash } from 'node:crypto';
import { hashChildren } from '../client/merkleHash.ts';
import { completeSubtrees, consistencyRanges, inclusionRanges, type LeafRange, type TreeNode } from './proofShapes.ts';

/**
 * How a tenant's tree is stored: as tiles, after the tlog-tiles layout. A tile of level L holds up to 16
 * consecutive hashes of complete subtrees at tree level 4·L (level 0: leaf hashes; level 1: roots of
 * 16-leaf subtrees; ...). Every complete subtree's hash is then one tile entry or the root of at most 8
 * entries of one tile, so a proof reads one small tile per level (six for millions of leaves, 512 bytes
 * each, stored inline) and hashes about 90 times; the tiles take about 42 bytes per leaf. (Tiles of 256,
 * as tlog serves them, cost a proof 700 hashes and TOASTed reads.) Only complete subtrees are stored; the
 * right edge of a tree of any size is computed from them, so proofs against older tree sizes need nothing
 * kept for those sizes.
 */

export const TILE_HEIGHT = 4;
export const TILE_WIDTH = 2 ** TILE_HEIGHT;
export const HASH_BYTES = 32;

export interface TileKey {
  readonly level: number;
  readonly index: number;
}

export interface Tile extends TileKey {
  /** The tile's entries, 32 bytes each; fewer than TILE_WIDTH for the last tile of a level. */
  readonly hashes: Buffer;
}

class MissingTileError extends Error {
  override name = 'MissingTileError';
}

const keyText = (key: TileKey) => `${key.level}/${key.index}`;

/** Entries at tile level `level` in a tree of `size` leaves. */
function entriesAt(level: number, size: number): number {
  return Math.floor(size / TILE_WIDTH ** level);
}

/** Where a complete subtree's hash comes from: which tile, and which of its entries. */
function locate(node: TreeNode): { key: TileKey; offset: number; count: number } {
  const level = Math.floor(node.level / TILE_HEIGHT);
  const count = 2 ** (node.level - level * TILE_HEIGHT);
  const first = node.index * count;
  return { key: { level, index: Math.floor(first / TILE_WIDTH) }, offset: first % TILE_WIDTH, count };
}

/** The tiles that hold the subtrees of these ranges, deduplicated. */
export function tilesForRanges(ranges: readonly LeafRange[]): TileKey[] {
  const keys = new Map<string, TileKey>();
  for (const range of ranges) {
    for (const node of completeSubtrees(range)) {
      const { key } = locate(node);
      keys.set(keyText(key), key);
    }
  }
  return [...keys.values()];
}

/** The last, incomplete tile of each level of a tree of this size: what appending rewrites. */
export function rightEdgeTiles(size: number): TileKey[] {
  const keys: TileKey[] = [];
  for (let level = 0; entriesAt(level, size) > 0; level += 1) {
    const entries = entriesAt(level, size);
    if (entries % TILE_WIDTH !== 0) keys.push({ level, index: Math.floor(entries / TILE_WIDTH) });
  }
  return keys;
}

/** Hash of `count` (a power of two) consecutive entries as a perfect subtree. */
function perfectRoot(hashes: Buffer, offset: number, count: number): Buffer {
  if (count === 1) return hashes.subarray(offset * HASH_BYTES, (offset + 1) * HASH_BYTES);
  const half = count / 2;
  return hashChildren(perfectRoot(hashes, offset, half), perfectRoot(hashes, offset + half, half));
}

/** The root of a full tile: the entry it contributes to the level above. */
export function tileRoot(tile: Tile): Buffer {
  if (tile.hashes.length !== TILE_WIDTH * HASH_BYTES) throw new RangeError(`tile ${keyText(tile)} is not full`);
  return perfectRoot(tile.hashes, 0, TILE_WIDTH);
}

/** MTH of a range: its complete subtrees folded from the right (RFC 9162 §2.1.1's recursion, unrolled). */
function foldRight(hashes: readonly Buffer[]): Buffer {
  let hash = hashes.at(-1)!;
  for (let i = hashes.length - 2; i >= 0; i -= 1) hash = hashChildren(hashes[i]!, hash);
  return hash;
}

/**
 * Tiles in memory, from which hashes of subtrees, ranges, roots and proofs are computed. Subtree hashes
 * computed once are kept: the proofs of an export's neighbouring events share most of their nodes.
 */
export class TileSet {
  private readonly byKey = new Map<string, Buffer>();
  private readonly computed = new Map<string, Buffer>();

  constructor(tiles: Iterable<Tile> = []) {
    for (const tile of tiles) this.add(tile);
  }

  add(tile: Tile): void {
    this.byKey.set(keyText(tile), tile.hashes);
  }

  tiles(): Tile[] {
    return [...this.byKey].map(([key, hashes]) => {
      const [level, index] = key.split('/').map(Number) as [number, number];
      return { level, index, hashes };
    });
  }

  has(key: TileKey): boolean {
    return this.byKey.has(keyText(key));
  }

  tileHashes(key: TileKey): Buffer | undefined {
    return this.byKey.get(keyText(key));
  }

  nodeHash(node: TreeNode): Buffer {
    const { key, offset, count } = locate(node);
    const hashes = this.byKey.get(keyText(key));
    if (!hashes || hashes.length < (offset + count) * HASH_BYTES) {
      throw new MissingTileError(`tile ${keyText(key)} lacks the subtree at level ${node.level}, index ${node.index}`);
    }
    if (count === 1) return perfectRoot(hashes, offset, count);
    const memo = `${node.level}/${node.index}`;
    let hash = this.computed.get(memo);
    if (!hash) {
      hash = perfectRoot(hashes, offset, count);
      this.computed.set(memo, hash);
    }
    return hash;
  }

  rangeHash(range: LeafRange): Buffer {
    return foldRight(completeSubtrees(range).map((node) => this.nodeHash(node)));
  }

  /** The root hash of the tree of this size (MTH of an empty tree is SHA-256 of nothing; not needed here). */
  root(size: number): Buffer {
    return this.rangeHash({ start: 0, end: size });
  }

  leafHash(index: number): Buffer {
    return this.nodeHash({ level: 0, index });
  }

  inclusionPath(leafIndex: number, treeSize: number): Buffer[] {
    return inclusionRanges(leafIndex, treeSize).map((range) => this.rangeHash(range));
  }

  consistencyPath(first: number, second: number): Buffer[] {
    return consistencyRanges(first, second).map((range) => this.rangeHash(range));
  }
}

/** Tiles an inclusion proof reads, the leaf's own included. */
export function tilesForInclusion(leafIndex: number, treeSize: number): TileKey[] {
  return tilesForRanges([{ start: leafIndex, end: leafIndex + 1 }, ...inclusionRanges(leafIndex, treeSize)]);
}

export function tilesForConsistency(first: number, second: number): TileKey[] {
  return tilesForRanges([{ start: 0, end: first }, { start: 0, end: second }, ...consistencyRanges(first, second)]);
}

export interface AppendResult {
  readonly size: number;
  readonly root: Buffer;
  /** Every tile the append changed or completed, with its whole new content. */
  readonly tiles: Tile[];
}

/**
 * Appends leaf hashes (`leaves`: 32 bytes each, concatenated) to a tree of `size` leaves whose right-edge
 * tiles (rightEdgeTiles(size)) are given. A tile that fills up contributes its root to the level above, as
 * tlog tiles do. Level by level, the new entries stay one buffer: the tiles written are slices of it, and
 * the roots of the full tiles, the level above's new entries, are hashed into another. The sealer appends
 * every event this way, and a Buffer per entry was a third of its time here.
 */
export function appendLeaves(size: number, edge: TileSet, leaves: Buffer): AppendResult {
  if (leaves.length === 0 || leaves.length % HASH_BYTES !== 0) throw new RangeError('nothing to append, or not whole hashes');
  const newSize = size + leaves.length / HASH_BYTES;
  const written: Tile[] = [];
  // The last, incomplete tile of each level after the append: what the root is computed from.
  const after = new TileSet();
  let added = leaves;
  let level = 0;
  for (; added.length > 0; level += 1) {
    const before = entriesAt(level, size);
    const index = Math.floor(before / TILE_WIDTH);
    const kept = before % TILE_WIDTH;
    // The level's entries from its last tile's first on: that tile's existing entries, then the new ones.
    const entries = kept === 0 ? added : Buffer.concat([edgeEntries(edge, level, index, kept), added]);
    const full = Math.floor(entries.length / (TILE_WIDTH * HASH_BYTES));
    const roots = Buffer.allocUnsafe(full * HASH_BYTES);
    for (let tile = 0; tile < full; tile += 1) {
      const hashes = entries.subarray(tile * TILE_WIDTH * HASH_BYTES, (tile + 1) * TILE_WIDTH * HASH_BYTES);
      written.push({ level, index: index + tile, hashes });
      perfectRootInto(hashes, roots, tile * HASH_BYTES);
    }
    if (entries.length > full * TILE_WIDTH * HASH_BYTES) {
      const last = { level, index: index + full, hashes: entries.subarray(full * TILE_WIDTH * HASH_BYTES) };
      written.push(last);
      after.add(last);
    }
    added = roots;
  }
  // Levels the append did not reach keep their last tile; the root needs it too.
  for (; entriesAt(level, newSize) > 0; level += 1) {
    const entries = entriesAt(level, newSize);
    if (entries % TILE_WIDTH === 0) continue;
    const index = Math.floor(entries / TILE_WIDTH);
    after.add({ level, index, hashes: edgeEntries(edge, level, index, entries % TILE_WIDTH) });
  }
  return { size: newSize, root: after.root(newSize), tiles: written };
}

/** The first `count` entries of an edge tile, which must hold at least that many. */
function edgeEntries(edge: TileSet, level: number, index: number, count: number): Buffer {
  const hashes = edge.tileHashes({ level, index });
  if (!hashes || hashes.length < count * HASH_BYTES) throw new MissingTileError(`tile ${level}/${index} lacks the tree's right edge`);
  return hashes.subarray(0, count * HASH_BYTES);
}

// 0x01 ‖ left ‖ right, refilled for each interior node (crypto.hash reads it before returning), and the
// copy of a tile whose pairs are hashed in place.
const nodeInput = Buffer.alloc(1 + 2 * HASH_BYTES, 1);
const scratch = Buffer.alloc(TILE_WIDTH * HASH_BYTES);

/**
 * The root of a full tile's 16 entries as a perfect subtree (RFC 9162 interior hashing, as hashChildren),
 * written into `target` at `offset`: the pairs are hashed level by level in a scratch copy, without a
 * Buffer per node.
 */
function perfectRootInto(hashes: Buffer, target: Buffer, offset: number): void {
  hashes.copy(scratch);
  for (let count = TILE_WIDTH; count > 1; count /= 2) {
    for (let pair = 0; pair < count / 2; pair += 1) {
      scratch.copy(nodeInput, 1, pair * 2 * HASH_BYTES, (pair + 1) * 2 * HASH_BYTES);
      scratch.write(hash('sha256', nodeInput), pair * HASH_BYTES, 'hex');
    }
  }
  scratch.copy(target, offset, 0, HASH_BYTES);
}
