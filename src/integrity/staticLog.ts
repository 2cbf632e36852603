import { parseCheckpoint, parseSignedNote } from '../client/signedNote.ts';
import { C2SP_TILE_WIDTH, tilesBetween, tlogTilePath } from './tlogTiles.ts';
import type { TransparencyLog } from './transparencyLog.ts';

/**
 * A static copy of a tenant's log (docs/integrity.md "A static copy"): the files a tlog-tiles client reads,
 * `checkpoint` and `tile/...`, written where any static server (or the archive bucket behind a CDN) can
 * serve them to monitors and witnesses who hold no API key. Incremental: the sink's own checkpoint says
 * what it holds; full tiles never change, so only the tiles completed since and the new partial ones are
 * written, then the checkpoint, last, so that a reader never sees a checkpoint whose tiles are missing.
 */

export interface StaticLogSink {
  /** The checkpoint the copy holds now, if any. */
  readCheckpoint(): Promise<string | undefined>;
  /** Writes one file; `immutable` for full hash tiles (a sink may set its cache headers by it). */
  write(path: string, body: Buffer, kind: 'checkpoint' | 'full' | 'partial'): Promise<void>;
}

export interface PublishResult {
  readonly size: number;
  readonly previousSize: number;
  readonly files: number;
}

export async function publishStaticLog(
  log: TransparencyLog,
  tenantId: string,
  sink: StaticLogSink,
  everything = false,
): Promise<PublishResult> {
  const note = await log.checkpoint(tenantId);
  const { size } = parseCheckpoint(parseSignedNote(note).text);
  const held = everything ? undefined : await sink.readCheckpoint();
  const previousSize = held === undefined ? 0 : Math.min(parseCheckpoint(parseSignedNote(held).text).size, size);
  const tiles = tilesBetween(previousSize, size);
  for (const tile of tiles) {
    const response =
      tile.level === 'entries' ? await log.entryBundle(tenantId, tile) : await log.hashTile(tenantId, { ...tile, level: tile.level });
    await sink.write(`tile/${tlogTilePath(tile)}`, response.body, tile.width === C2SP_TILE_WIDTH ? 'full' : 'partial');
  }
  await sink.write('checkpoint', Buffer.from(note), 'checkpoint');
  return { size, previousSize, files: tiles.length + 1 };
}
