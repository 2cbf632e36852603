import { createPublicKey } from 'node:crypto';
import {
  COSIGNATURE_TYPE,
  LOG_SIGNATURE_TYPE,
  checkpointText,
  formatSignedNote,
  isSignatureBy,
  logSignatureLine,
  NoteFormatError,
  parseCheckpoint,
  parseSignedNote,
  parseVerifierKey,
  verifierKeyText,
  verifyNoteSignature,
} from '../client/signedNote.ts';
import type { Database } from '../db/database.ts';
import { NotFoundError, ValidationError } from '../platform/errors.ts';
import {
  composeHashTile,
  encodeEntryBundle,
  bundleLeaves,
  storedTilesOf,
  tileExists,
  type TlogTilePath,
  C2SP_TILE_WIDTH,
} from './tlogTiles.ts';
import {
  cosignaturesOf,
  currentSealKeyPem,
  hasCheckpointOf,
  latestCheckpoint,
  leafDocuments,
  recordCosignature,
  storedTileRun,
} from './transparencyLogStore.ts';
import { HASH_BYTES } from './tiles.ts';
import { bundleOfKeptEntries, entriesOf, keptEntriesText } from './entryBundles.ts';
import { bundleGeneration, keepEntryBundle, keptEntryBundle } from './entryBundleStore.ts';

/**
 * A tenant's log as a C2SP transparency log (docs/integrity.md "Checkpoints and tiles"): the latest
 * checkpoint with the cosignatures the tenant's witnesses posted, its verifier key, hash tiles and entry
 * bundles, and the acceptance of cosignatures. Full hash tiles never change, so they are kept in memory
 * (FULL_TILE_CACHE_BYTES): a monitor reading a log from the start costs the database one read per tile.
 */

const FULL_TILE_CACHE_BYTES = 64 * 1024 * 1024;
const FULL_TILE_BYTES = C2SP_TILE_WIDTH * HASH_BYTES;
/** Full tiles read together on a miss, a block of them: 16 tiles are 256 stored rows, 128 KiB (64 measured no better). */
const READ_AHEAD_TILES = 16;
/** A line of a consistency proof in a tlog-witness request: one hash, standard base64 with padding. */
const PROOF_LINE = /^[A-Za-z0-9+/]{43}=$/;
/** Cosignatures a note may carry per post; signed-note asks verifiers to take at least 16 signatures. */
const MAX_COSIGNATURES = 16;

export interface TileResponse {
  readonly body: Buffer;
  /** A full tile (or bundle): the same bytes forever, for hash tiles. */
  readonly full: boolean;
}

export class TransparencyLog {
  private readonly db: Database;
  /** Full hash tiles by tenant, level and index; Map order is the eviction order. */
  private readonly fullTiles = new Map<string, Buffer>();
  private cachedBytes = 0;
  /** Blocks of full tiles being read, by tenant, level and block. */
  private readonly blocksReading = new Map<string, Promise<void>>();
  /** Each tenant's tree size as last read: a tile within it exists for good, so only a larger one re-reads it. */
  private readonly knownSizes = new Map<string, number>();

  constructor(db: Database) {
    this.db = db;
  }

  /** The latest checkpoint as a signed note: the log's signature, then the witnesses' cosignatures of that tree. */
  async checkpoint(tenantId: string): Promise<string> {
    const stored = await latestCheckpoint(this.db, tenantId);
    if (!stored) throw new NotFoundError('No checkpoint yet: nothing of this tenant has been sealed.');
    const text = checkpointText({ origin: stored.origin, size: stored.treeSize, rootHash: stored.rootHash });
    const logLine = logSignatureLine(stored.origin, createPublicKey(stored.publicKeyPem), stored.noteSignature);
    const cosignatures = await cosignaturesOf(this.db, tenantId, stored.treeSize, stored.rootHash);
    return formatSignedNote(text, [logLine, ...cosignatures.map((cosignature) => cosignature.signatureLine)]);
  }

  /** The vkey of the tenant's log: its origin as the key's name, the current signing key. */
  async verifierKey(tenantId: string): Promise<string> {
    const stored = await latestCheckpoint(this.db, tenantId);
    const pem = await currentSealKeyPem(this.db);
    if (!stored || !pem) throw new NotFoundError('No checkpoint yet: nothing of this tenant has been sealed.');
    return `${verifierKeyText(stored.origin, LOG_SIGNATURE_TYPE, createPublicKey(pem))}\n`;
  }

  async hashTile(tenantId: string, tile: TlogTilePath & { level: number }): Promise<TileResponse> {
    const full = tile.width === C2SP_TILE_WIDTH;
    const cacheKey = `${tenantId}/${tile.level}/${tile.index}`;
    if (full) {
      const cached = this.fullTiles.get(cacheKey);
      if (cached) {
        this.readNextBlockEarly(tenantId, tile);
        return { body: cached, full };
      }
    }
    await this.requireTile(tenantId, tile);
    if (full) return { body: await this.readFullTiles(tenantId, tile), full };
    const stored = storedTilesOf(tile);
    const body = composeHashTile(tile, await storedTileRun(this.db, tenantId, stored.level, stored.first, stored.last));
    if (!body) throw new NotFoundError('No such tile.');
    return { body, full };
  }

  /**
   * A full tile, read with the other full tiles of its block of READ_AHEAD_TILES in one query, and kept: a
   * monitor reads a log from the start tile after tile, several at once, and a query per block rather than
   * per tile is what brings its first read near a static server's (BENCHMARKS.md, "Tiles"). Requests for
   * tiles of a block being read wait for that read instead of starting their own.
   */
  private async readFullTiles(tenantId: string, tile: TlogTilePath & { level: number }): Promise<Buffer> {
    await this.startReadingBlock(tenantId, tile.level, Math.floor(tile.index / READ_AHEAD_TILES));
    const kept = this.fullTiles.get(`${tenantId}/${tile.level}/${tile.index}`);
    if (!kept) throw new NotFoundError('No such tile.');
    return kept;
  }

  /** The read of a block: the one under way, or a new one. */
  private startReadingBlock(tenantId: string, level: number, block: number): Promise<void> {
    const blockKey = `${tenantId}/${level}/b${block}`;
    let reading = this.blocksReading.get(blockKey);
    if (!reading) {
      reading = this.readBlock(tenantId, level, block).finally(() => this.blocksReading.delete(blockKey));
      this.blocksReading.set(blockKey, reading);
    }
    return reading;
  }

  /**
   * Once a reader is half-way through a block, the next one is read before it is asked for, so that a
   * monitor reading on does not wait for the database at each block's start. Only within the tree as last
   * read, and only when that block is not kept yet; a failure here is the later request's to report.
   */
  private readNextBlockEarly(tenantId: string, tile: TlogTilePath & { level: number }): void {
    if (tile.index % READ_AHEAD_TILES !== READ_AHEAD_TILES / 2) return;
    const next = (Math.floor(tile.index / READ_AHEAD_TILES) + 1) * READ_AHEAD_TILES;
    if (this.fullTiles.has(`${tenantId}/${tile.level}/${next}`)) return;
    if (!tileExists({ level: tile.level, index: next, width: C2SP_TILE_WIDTH }, this.knownSizes.get(tenantId) ?? 0)) return;
    this.startReadingBlock(tenantId, tile.level, next / READ_AHEAD_TILES).catch(() => undefined);
  }

  private async readBlock(tenantId: string, level: number, block: number): Promise<void> {
    const entries = Math.floor((this.knownSizes.get(tenantId) ?? 0) / C2SP_TILE_WIDTH ** level);
    const first = block * READ_AHEAD_TILES;
    const count = Math.min(READ_AHEAD_TILES, Math.floor(entries / C2SP_TILE_WIDTH) - first);
    if (count <= 0) return;
    const stored = storedTilesOf({ level, index: first, width: C2SP_TILE_WIDTH });
    const perTile = stored.last - stored.first + 1;
    const run = await storedTileRun(this.db, tenantId, stored.level, stored.first, stored.first + count * perTile - 1);
    for (let offset = 0; offset < count; offset += 1) {
      const body = composeHashTile(
        { level, index: first + offset, width: C2SP_TILE_WIDTH },
        run.slice(offset * perTile, (offset + 1) * perTile),
      );
      if (!body) break;
      this.remember(`${tenantId}/${level}/${first + offset}`, Buffer.from(body));
    }
  }

  /** The generation of the tenant's entry bundles (migration 031): a redaction or an expiry moves it on. */
  async bundleGeneration(tenantId: string): Promise<number> {
    return bundleGeneration(this.db, tenantId);
  }

  /**
   * An entry bundle (entryBundles.ts). A full one is kept in the database once built (entryBundleStore.ts),
   * under the generation of the tenant's bundles read before its events, and served from there while no
   * redaction or expiry has moved that generation on: a monitor reading the log from the start then costs
   * one row per bundle instead of 256 events rendered again, on every api instance and after a restart.
   */
  async entryBundle(tenantId: string, tile: TlogTilePath): Promise<TileResponse> {
    if (tile.width !== C2SP_TILE_WIDTH) return { body: encodeEntryBundle(await this.bundleEntries(tenantId, tile)), full: false };
    // Kept under the tenant's own id: a key of another tenant never reaches this row.
    const kept = await keptEntryBundle(this.db, tenantId, tile.index);
    if (kept.entries !== undefined) return { body: bundleOfKeptEntries(kept.entries), full: true };
    const entries = await this.bundleEntries(tenantId, tile);
    const text = keptEntriesText(entries);
    if (text !== undefined) await keepEntryBundle(this.db, tenantId, tile.index, kept.generation, text);
    return { body: encodeEntryBundle(entries), full: true };
  }

  private async bundleEntries(tenantId: string, tile: TlogTilePath): Promise<Buffer[]> {
    await this.requireTile(tenantId, tile);
    const { first, count } = bundleLeaves(tile);
    const leaves = await leafDocuments(this.db, tenantId, first, count);
    if (leaves.length !== count) throw new NotFoundError('No such entry bundle.');
    const level0 = await this.hashTile(tenantId, { level: 0, index: tile.index, width: tile.width });
    return entriesOf(leaves, level0.body);
  }

  /**
   * Accepts a witness's cosignatures of one of the tenant's checkpoints, posted in the shape of a tlog-witness
   * add-checkpoint request (an `old <size>` line, optional proof lines, a blank line, the checkpoint) whose
   * note carries the log's signature and the witness's cosignature lines, with the witness's vkey. Returns
   * the number kept.
   */
  async acceptCosignatures(tenantId: string, body: string, witnessKeyText: string): Promise<number> {
    const invalid = (message: string) => ValidationError.single('body', message);
    let witnessKey: ReturnType<typeof parseVerifierKey>;
    try {
      witnessKey = parseVerifierKey(witnessKeyText);
    } catch (error) {
      throw ValidationError.single('witness_key', (error as Error).message);
    }
    if (witnessKey.type !== COSIGNATURE_TYPE)
      throw ValidationError.single('witness_key', 'a witness key is of type 0x04 (tlog-cosignature/v1)');
    const split = body.indexOf('\n\n');
    if (split < 0) throw invalid('an add-checkpoint body is "old <size>", proof lines, a blank line and the checkpoint');
    const preamble = body.slice(0, split).split('\n');
    const old = /^old (0|[1-9][0-9]{0,15})$/.exec(preamble[0] ?? '');
    if (!old || preamble.length > 64) throw invalid('the first line is "old <size>", then at most 63 proof lines');
    // The proof is for a witness checking consistency; the log knows its own tree and needs none, but a body
    // that is not of the shape is refused rather than kept quiet about.
    const badProofLine = preamble.slice(1).findIndex((line) => !PROOF_LINE.test(line));
    if (badProofLine >= 0) throw invalid(`proof line ${badProofLine + 1} is not a base64 SHA-256 hash`);
    let checkpoint: ReturnType<typeof parseCheckpoint>;
    let note: ReturnType<typeof parseSignedNote>;
    try {
      note = parseSignedNote(body.slice(split + 2));
      checkpoint = parseCheckpoint(note.text);
    } catch (error) {
      if (error instanceof NoteFormatError) throw invalid(error.message);
      throw error;
    }
    if (Number(old[1]) > checkpoint.size) throw invalid('the old size is larger than the checkpoint');
    const stored = await latestCheckpoint(this.db, tenantId);
    if (!stored || stored.origin !== checkpoint.origin) throw new NotFoundError("The checkpoint is not of this tenant's log.");
    // Only a tree this log signed is cosigned here: its own signature must be on the note and verify.
    const logKey = parseVerifierKey(verifierKeyText(stored.origin, LOG_SIGNATURE_TYPE, createPublicKey(stored.publicKeyPem)));
    const logSignature = note.signatures.find((signature) => isSignatureBy(signature, logKey));
    if (
      !logSignature ||
      !verifyNoteSignature(note.text, logSignature, logKey).valid ||
      !(await hasCheckpointOf(this.db, tenantId, checkpoint.size, checkpoint.rootHash))
    )
      throw invalid('the checkpoint is not one this log signed');
    const cosignatures = note.signatures.filter((signature) => isSignatureBy(signature, witnessKey)).slice(0, MAX_COSIGNATURES);
    if (cosignatures.length === 0) throw invalid('the note carries no cosignature by the witness key');
    for (const cosignature of cosignatures) {
      const verified = verifyNoteSignature(note.text, cosignature, witnessKey);
      if (!verified.valid) throw invalid(`the cosignature of ${witnessKey.name} does not verify`);
      await recordCosignature(this.db, {
        tenantId,
        treeSize: checkpoint.size,
        rootHash: checkpoint.rootHash,
        witnessName: witnessKey.name,
        witnessKey: witnessKey.text,
        cosignedAtSeconds: verified.timestamp!,
        signatureLine: cosignature.line,
      });
    }
    return cosignatures.length;
  }

  /** 404 for a tile the tenant's tree does not have (yet): tlog-tiles serves no empty tile. */
  private async requireTile(tenantId: string, tile: TlogTilePath): Promise<void> {
    if (tileExists(tile, this.knownSizes.get(tenantId) ?? 0)) return;
    const stored = await latestCheckpoint(this.db, tenantId);
    if (stored) this.rememberSize(tenantId, stored.currentSize);
    if (!stored || !tileExists(tile, stored.currentSize)) throw new NotFoundError('No such tile.');
  }

  private rememberSize(tenantId: string, size: number): void {
    // Bounded like the tile cache: one number per tenant that asked, dropped oldest first.
    this.knownSizes.delete(tenantId);
    this.knownSizes.set(tenantId, size);
    if (this.knownSizes.size > 100_000) this.knownSizes.delete(this.knownSizes.keys().next().value!);
  }

  private remember(key: string, tile: Buffer): void {
    if (this.fullTiles.has(key)) return;
    this.fullTiles.set(key, tile);
    this.cachedBytes += FULL_TILE_BYTES;
    while (this.cachedBytes > FULL_TILE_CACHE_BYTES) {
      const oldest = this.fullTiles.keys().next().value!;
      this.fullTiles.delete(oldest);
      this.cachedBytes -= FULL_TILE_BYTES;
    }
  }
}
