import { HASH_BYTES, TILE_HEIGHT, TILE_WIDTH } from './tiles.ts';

/**
 * The tenant's tree as C2SP tlog-tiles serves it (docs/integrity.md "Checkpoints and tiles"): tiles of 256
 * hashes, the tile at level L holding hashes of 256^L-leaf subtrees, at `tile/<L>/<N>[.p/<W>]`, and entry
 * bundles at `tile/entries/<N>[.p/<W>]`. The service stores tiles of 16 (tiles.ts): our level 2L holds the
 * very hashes of a C2SP level L (16^2L = 256^L leaves each), so a C2SP tile is 16 consecutive stored tiles
 * of level 2L, concatenated; nothing is recomputed, and the odd levels are not needed here.
 */

export const C2SP_TILE_WIDTH = 256;
const STORED_PER_C2SP = C2SP_TILE_WIDTH / TILE_WIDTH;
const STORED_LEVELS_PER_C2SP = 8 / TILE_HEIGHT;

export interface TlogTilePath {
  /** A tile level, or 'entries' for an entry bundle. */
  readonly level: number | 'entries';
  readonly index: number;
  /** 256 for a full tile; 1 to 255 for a partial one. */
  readonly width: number;
}

/** Parses what follows `tile/`; undefined for anything tlog-tiles does not name. */
export function parseTlogTilePath(path: string): TlogTilePath | undefined {
  const match = /^(entries|0|[1-9][0-9]?)\/((?:x[0-9]{3}\/)*[0-9]{3})(?:\.p\/([1-9][0-9]{0,2}))?$/.exec(path);
  if (!match) return undefined;
  const level = match[1] === 'entries' ? 'entries' : Number(match[1]);
  if (level !== 'entries' && level > 63) return undefined;
  const digits = match[2]!.replaceAll('x', '').replaceAll('/', '');
  // No index element with leading zeros beyond its padding: x000/001 is written 001.
  if (digits.length > 3 && digits.startsWith('000')) return undefined;
  const index = Number(digits);
  if (!Number.isSafeInteger(index)) return undefined;
  const width = match[3] === undefined ? C2SP_TILE_WIDTH : Number(match[3]);
  if (match[3] !== undefined && width >= C2SP_TILE_WIDTH) return undefined;
  return { level, index, width };
}

/** Hashes (or leaves, for entries) at this tile's level in a tree of `treeSize` leaves. */
function entriesAtLevel(tile: TlogTilePath, treeSize: number): number {
  const level = tile.level === 'entries' ? 0 : tile.level;
  return Math.floor(treeSize / C2SP_TILE_WIDTH ** level);
}

/**
 * Whether the tree of `treeSize` has this tile: a full tile once all 256 of its hashes exist, a partial one
 * of width W when its first W hashes do (the partial tile of that size, or of an earlier one: hashes never
 * change once written, so any prefix of the level is the tile some earlier size had).
 */
export function tileExists(tile: TlogTilePath, treeSize: number): boolean {
  return tile.index * C2SP_TILE_WIDTH + tile.width <= entriesAtLevel(tile, treeSize);
}

/** Which stored tiles make this hash tile: of level 2L, from `first` to `last`. */
export function storedTilesOf(tile: TlogTilePath & { level: number }): { level: number; first: number; last: number } {
  const first = tile.index * STORED_PER_C2SP;
  return { level: tile.level * STORED_LEVELS_PER_C2SP, first, last: first + Math.ceil(tile.width / TILE_WIDTH) - 1 };
}

/** The tile's bytes from its stored tiles, in index order; undefined when one is missing or short. */
export function composeHashTile(tile: TlogTilePath & { level: number }, stored: readonly Buffer[]): Buffer | undefined {
  const bytes = tile.width * HASH_BYTES;
  const joined = stored.length === 1 ? stored[0]! : Buffer.concat(stored);
  return joined.length < bytes ? undefined : joined.subarray(0, bytes);
}

/** The leaves an entry bundle holds: [first, first + width). */
export function bundleLeaves(tile: TlogTilePath): { first: number; count: number } {
  return { first: tile.index * C2SP_TILE_WIDTH, count: tile.width };
}

/** An entry bundle: each entry as a big-endian uint16 length and its bytes. */
export function encodeEntryBundle(entries: readonly Buffer[]): Buffer {
  const parts: Buffer[] = [];
  for (const entry of entries) {
    if (entry.length > 0xffff) throw new RangeError('an entry of a bundle is at most 65,535 bytes');
    const length = Buffer.alloc(2);
    length.writeUInt16BE(entry.length);
    parts.push(length, entry);
  }
  return Buffer.concat(parts);
}
