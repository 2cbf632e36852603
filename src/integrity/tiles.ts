import { hashChildren } from '../client/integrity.ts';
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

export class MissingTileError extends Error {
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
 * Appends leaf hashes to a tree of `size` leaves whose right-edge tiles (rightEdgeTiles(size)) are given.
 * A tile that fills up contributes its root to the level above, as tlog tiles do.
 */
export function appendLeaves(size: number, edge: TileSet, leafHashes: readonly Buffer[]): AppendResult {
  if (leafHashes.length === 0) throw new RangeError('nothing to append');
  // Per tile level: the index of its last tile and that tile's entries so far.
  const levels: Array<{ index: number; entries: Buffer[] }> = [];
  const levelState = (level: number) => {
    let state = levels[level];
    if (!state) {
      const entries = entriesAt(level, size);
      const key = { level, index: Math.floor(entries / TILE_WIDTH) };
      const count = entries % TILE_WIDTH;
      const existing: Buffer[] = [];
      if (count > 0) {
        for (let offset = 0; offset < count; offset += 1) existing.push(edge.nodeHash({ level: level * TILE_HEIGHT, index: key.index * TILE_WIDTH + offset }));
      }
      state = { index: key.index, entries: existing };
      levels[level] = state;
    }
    return state;
  };
  const written = new Map<string, Tile>();
  const changed = new Set<number>();
  const push = (level: number, hash: Buffer): void => {
    const state = levelState(level);
    state.entries.push(hash);
    changed.add(level);
    if (state.entries.length < TILE_WIDTH) return;
    const full = Buffer.concat(state.entries);
    written.set(keyText({ level, index: state.index }), { level, index: state.index, hashes: full });
    state.index += 1;
    state.entries = [];
    push(level + 1, perfectRoot(full, 0, TILE_WIDTH));
  };
  for (const hash of leafHashes) push(0, hash);
  const newSize = size + leafHashes.length;
  // The root needs the last tile of every level, also of levels this append did not reach.
  const after = new TileSet();
  for (let level = 0; entriesAt(level, newSize) > 0; level += 1) {
    const state = levelState(level);
    if (state.entries.length === 0) continue;
    const tile = { level, index: state.index, hashes: Buffer.concat(state.entries) };
    after.add(tile);
    if (changed.has(level)) written.set(keyText(tile), tile);
  }
  return { size: newSize, root: after.root(newSize), tiles: [...written.values()] };
}
