import { parseCheckpoint, parseSignedNote } from '../client/signedNote.ts';
import { C2SP_TILE_WIDTH, tilesBetween, tlogTilePath, type TlogTilePath } from './tlogTiles.ts';
import type { TransparencyLog } from './transparencyLog.ts';

/**
 * A static copy of a tenant's log (docs/integrity.md "A static copy"): the files a tlog-tiles client reads,
 * `checkpoint` and `tile/...`, written where any static server (or the archive bucket behind a CDN) can
 * serve them to monitors and witnesses who hold no API key. Incremental: the sink's own checkpoint says
 * what it holds; full tiles never change, so only the tiles completed since and the new partial ones are
 * written, then the checkpoint, last, so that a reader never sees a checkpoint whose tiles are missing.
 * Entry bundles are the exception: a redaction or an expiry changes the bundles of the events it touched, so
 * the copy also holds the generation of the tenant's bundles it was written at (BUNDLE_GENERATION, beside
 * the checkpoint), and when that has moved on since, every full bundle it held is written again.
 */

/** The file of the copy naming the generation of its entry bundles (migration 031); no tlog-tiles path. */
const BUNDLE_GENERATION = 'bundle-generation';

export interface StaticLogSink {
  /** A file the copy holds now (the checkpoint, the bundles' generation), if any. */
  read(path: string): Promise<string | undefined>;
  /** Writes one file; `full` for full tiles (a sink may set its cache headers by it), `checkpoint` for short-lived ones. */
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
  const held = everything ? undefined : await sink.read('checkpoint');
  const previousSize = held === undefined ? 0 : Math.min(parseCheckpoint(parseSignedNote(held).text).size, size);
  // Read before any bundle is: a change committed while they are written moves it on, and the next run rewrites them.
  const generation = String(await log.bundleGeneration(tenantId));
  const heldGeneration = previousSize === 0 ? generation : (await sink.read(BUNDLE_GENERATION))?.trim();
  const tiles = [...(heldGeneration === generation ? [] : fullBundlesBelow(previousSize)), ...tilesBetween(previousSize, size)];
  for (const tile of tiles) {
    const response =
      tile.level === 'entries' ? await log.entryBundle(tenantId, tile) : await log.hashTile(tenantId, { ...tile, level: tile.level });
    await sink.write(`tile/${tlogTilePath(tile)}`, response.body, tile.width === C2SP_TILE_WIDTH ? 'full' : 'partial');
  }
  await sink.write(BUNDLE_GENERATION, Buffer.from(`${generation}\n`), 'checkpoint');
  await sink.write('checkpoint', Buffer.from(note), 'checkpoint');
  return { size, previousSize, files: tiles.length + 2 };
}

/** The full entry bundles of a tree of `size` leaves. */
function fullBundlesBelow(size: number): TlogTilePath[] {
  return Array.from({ length: Math.floor(size / C2SP_TILE_WIDTH) }, (_, index) => ({
    level: 'entries' as const,
    index,
    width: C2SP_TILE_WIDTH,
  }));
}
