import type { ConsistencyProof, InclusionProof, SignedTreeHead } from '../client/integrity.ts';
import type { Database, Queryable } from '../db/database.ts';
import type { ExportSession } from '../events/eventExport.ts';
import { UUID_PATTERN } from '../events/eventFields.ts';
import { ConflictError, GoneError, NotFoundError, ValidationError } from '../platform/errors.ts';
import { pageOf, rowsToRead } from '../platform/paging.ts';
import { findExpiredEvent, type ExpiredLeavesWindow } from './expiredEvents.ts';
import { ExportProofs } from './exportProofs.ts';
import { TileSet, tilesForConsistency } from './tiles.ts';
import { TreeHeadCursor } from './treeHeadCursor.ts';
import { latestTreeHead, listSealKeys, listTreeHeads, loadTiles, proofMaterial, treeHeadOfSize, type SealKeyRecord } from './treeStore.ts';

/** 409 for an event committed but not yet given its leaf; the client retries after Retry-After. */
export class NotYetSealedError extends ConflictError {
  readonly retryAfterSeconds: number;

  constructor(retryAfterSeconds: number) {
    super('not_yet_sealed', 'The event is stored but not yet sealed into the tree; retry after Retry-After seconds.');
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

export interface HeadsRequest {
  readonly tenantId: string;
  readonly sinceMs: number | undefined;
  readonly untilMs: number | undefined;
  readonly limit: number;
  readonly cursor: string | undefined;
}

/** The read side of tamper evidence: heads, proofs and keys, for the API. */
export class IntegrityReader {
  private readonly db: Database;
  private readonly cursors: TreeHeadCursor;

  constructor(db: Database, pepper: string) {
    this.db = db;
    this.cursors = new TreeHeadCursor(pepper);
  }

  async latestHead(tenantId: string): Promise<SignedTreeHead> {
    const head = await latestTreeHead(this.db, tenantId);
    if (!head) throw new NotFoundError('No signed tree head yet: nothing of this tenant has been sealed.');
    return head;
  }

  /** `{"tree_heads": [...], "page": {...}}`, newest first. */
  async headsPage(request: HeadsRequest): Promise<object> {
    const { tenantId, limit } = request;
    const window = JSON.stringify([request.sinceMs ?? null, request.untilMs ?? null]);
    const beforeMs = request.cursor === undefined ? undefined : this.cursors.decode(request.cursor, tenantId, window);
    const range = { sinceMs: request.sinceMs, untilMs: request.untilMs, beforeMs };
    const heads = await listTreeHeads(this.db, tenantId, range, rowsToRead(limit));
    const { rows, page } = pageOf(heads, limit, (last) => this.cursors.encode(Date.parse(last.timestamp), tenantId, window));
    return { tree_heads: rows, page };
  }

  /** The head a proof is computed against: of exactly this size, or the latest. */
  private async headFor(db: Queryable, tenantId: string, treeSize: number | undefined, field: string): Promise<SignedTreeHead> {
    if (treeSize === undefined) return this.latestHead(tenantId);
    const head = await treeHeadOfSize(db, tenantId, treeSize);
    if (!head)
      throw new NotFoundError(`No signed tree head of size ${treeSize} (${field}); sizes are listed by GET /audit/integrity/tree-heads.`);
    return head;
  }

  async inclusionProof(
    tenantId: string,
    eventId: string,
    treeSize: number | undefined,
    retryAfterSeconds: number,
  ): Promise<InclusionProof> {
    const notFound = () => new NotFoundError('No event with this id.');
    if (!UUID_PATTERN.test(eventId)) throw notFound();
    const material = await proofMaterial(this.db, tenantId, eventId.toLowerCase(), treeSize);
    if (!material.eventFound) {
      // An expired event's leaf stays in the tree, but its content is gone: say so, and under which policy.
      const expired = await findExpiredEvent(this.db, tenantId, eventId.toLowerCase());
      if (!expired) throw notFound();
      throw new GoneError('expired', `The event expired at the end of its retention period (${expired.retain}, ${expired.source}).`, {
        expired_at: expired.expiredAt.toISOString(),
        retain: expired.retain,
        source: expired.source,
      });
    }
    const { leafIndex, head } = material;
    if (leafIndex === undefined) throw new NotYetSealedError(retryAfterSeconds);
    if (!head) {
      throw treeSize === undefined
        ? new NotFoundError('No signed tree head yet: nothing of this tenant has been sealed.')
        : new NotFoundError(`No signed tree head of size ${treeSize} (tree_size); sizes are listed by GET /audit/integrity/tree-heads.`);
    }
    if (leafIndex >= head.tree_size) {
      throw ValidationError.single(
        'tree_size',
        `the tree head of size ${head.tree_size} does not include this event (leaf ${leafIndex}); ask for a larger size`,
      );
    }
    const tiles = new TileSet(material.tiles);
    return {
      leaf_index: leafIndex,
      tree_size: head.tree_size,
      leaf_hash: tiles.leafHash(leafIndex).toString('hex'),
      audit_path: tiles.inclusionPath(leafIndex, head.tree_size).map((hash) => hash.toString('hex')),
    };
  }

  async consistencyProof(tenantId: string, first: number, second: number): Promise<ConsistencyProof> {
    if (first > second) throw ValidationError.single('first', 'must not be greater than second');
    await this.headFor(this.db, tenantId, first, 'first');
    await this.headFor(this.db, tenantId, second, 'second');
    const tiles = new TileSet(await loadTiles(this.db, tenantId, tilesForConsistency(first, second)));
    return { first, second, proof: tiles.consistencyPath(first, second).map((hash) => hash.toString('hex')) };
  }

  /**
   * Proofs for an export opened with a shared snapshot (EventExporter.open with shareSnapshot), against the
   * head of `treeSize` when given (404 when no head has that size), else the latest; and the window of its
   * records of expired leaves. That window is the one its events cover (from the oldest millisecond they reach
   * to `until`), so that a walk with `until` lists each expired leaf once; when it holds more than
   * EXPIRED_RECORD_CAP of them, the export is narrowed to end sooner, events included, and is truncated.
   */
  async openExportProofs(
    tenantId: string,
    session: ExportSession,
    options: { readonly treeSize?: number; readonly untilMs?: number; readonly expiredCap?: number } = {},
  ): Promise<{ proofs: ExportProofs; expiredWindow: ExpiredLeavesWindow }> {
    const proofs = await ExportProofs.open(this.db, tenantId, session.snapshotId!, options.treeSize);
    try {
      const cut = await proofs.expiredCut({ sinceMs: session.coveredSinceMs, untilMs: options.untilMs }, options.expiredCap);
      if (cut !== undefined) session.narrow(cut);
      return { proofs, expiredWindow: { sinceMs: session.coveredSinceMs, untilMs: options.untilMs } };
    } catch (error) {
      await proofs.close();
      throw error;
    }
  }

  async keys(): Promise<{ keys: SealKeyRecord[] }> {
    return { keys: await listSealKeys(this.db) };
  }
}
