import type pg from 'pg';
import type { InclusionProof, SignedTreeHead } from '../client/integrity.ts';
import type { Database } from '../db/database.ts';
import { positionOf } from '../events/eventStore.ts';
import { formatTimestamp } from '../events/eventFields.ts';
import { TileSet, tilesForInclusion, type Tile } from './tiles.ts';
import { NotFoundError } from '../platform/errors.ts';
import { expiredLeaves, expiredLeavesCut, type ExpiredLeavesWindow } from './expiredEvents.ts';
import { latestTreeHead, leafIndexesOf, loadTiles, treeHeadOfSize } from './treeStore.ts';

/** Events per round of leaf and tile look-ups. */
const BATCH = 256;

/**
 * The most records of expired leaves one export lists (beyond it only to finish a millisecond), as
 * EXPORT_ROW_CAP bounds its events: a window of a million expired leaves is walked page by page with `until`
 * like a long trail, and what one page holds in memory and sends stays bounded.
 */
export const EXPIRED_RECORD_CAP = 10_000;

/**
 * Inclusion proofs for an export (`proofs=true`), all against the tenant's latest head in the export's own
 * snapshot: this reads on a second connection that imports the export's snapshot, so the head, the leaves
 * and the rows are one consistent view. Each exported event gains a `proof` member ({leaf_index, tree_size,
 * leaf_hash, audit_path}, or null for an event committed after that head); NDJSON lines also carry the
 * head as `tree_head`, so that every line verifies on its own. docs/integrity.md describes the shape.
 */
export class ExportProofs {
  readonly head: SignedTreeHead | undefined;
  private readonly client: pg.PoolClient;
  private readonly tenantId: string;
  private readonly tiles = new Map<string, Tile>();
  private closed = false;

  private constructor(client: pg.PoolClient, tenantId: string, head: SignedTreeHead | undefined) {
    this.client = client;
    this.tenantId = tenantId;
    this.head = head;
  }

  static async open(db: Database, tenantId: string, snapshotId: string, treeSize?: number): Promise<ExportProofs> {
    const client = await db.connect();
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      await client.query(`SET TRANSACTION SNAPSHOT '${snapshotId.replace(/[^0-9A-F-]/gi, '')}'`);
      if (treeSize === undefined) return new ExportProofs(client, tenantId, await latestTreeHead(client, tenantId));
      const head = await treeHeadOfSize(client, tenantId, treeSize);
      if (head) return new ExportProofs(client, tenantId, head);
    } catch (error) {
      client.release(error as Error);
      throw error;
    }
    await new ExportProofs(client, tenantId, undefined).close();
    throw new NotFoundError(`No signed tree head of size ${treeSize} (tree_size); sizes are listed by GET /audit/integrity/tree-heads.`);
  }

  /** The export's rows with their proofs added, in the same order. */
  async *decorate(rows: AsyncIterable<string>, format: 'json' | 'ndjson'): AsyncGenerator<string> {
    const headMember = format === 'ndjson' ? `,"tree_head":${JSON.stringify(this.head ?? null)}` : '';
    let batch: string[] = [];
    const flush = async function* (this: ExportProofs) {
      const proofs = await this.proofsFor(batch);
      for (let index = 0; index < batch.length; index += 1) {
        const document = batch[index]!;
        yield `${document.slice(0, -1)},"proof":${JSON.stringify(proofs[index] ?? null)}${headMember}}`;
      }
      batch = [];
    }.bind(this);
    for await (const row of rows) {
      batch.push(row);
      if (batch.length >= BATCH) yield* flush();
    }
    if (batch.length > 0) yield* flush();
  }

  private async proofsFor(documents: readonly string[]): Promise<Array<InclusionProof | undefined>> {
    const head = this.head;
    if (!head) return [];
    const events = documents.map((document) => {
      const position = positionOf(document);
      return { eventId: position.eventId, timestamp: formatTimestamp(position.occurredAtMs) };
    });
    const indexes = await leafIndexesOf(this.client, this.tenantId, events);
    return this.proofsAt(events.map((event) => indexes.get(`${event.eventId}@${event.timestamp}`)));
  }

  /**
   * Where the export must stop for its records of expired leaves in `window` to number at most `cap`: the
   * first millisecond to keep (events included, so that the page ends on one boundary), or undefined when
   * they fit. None without a head.
   */
  async expiredCut(window: ExpiredLeavesWindow, cap = EXPIRED_RECORD_CAP): Promise<number | undefined> {
    if (!this.head) return undefined;
    return expiredLeavesCut(this.client, this.tenantId, this.head.tree_size, window, cap);
  }

  /**
   * The export's records of expired leaves (docs/integrity.md "Expired events"): for each leaf below the head
   * whose event expired with a timestamp in `window`, newest first, what the expiry recorded and the leaf's
   * inclusion proof, so that a verifier proves the leaf and reports it as expired, not missing. As one JSON
   * member per record; NDJSON lines also carry the head. None without a head or an expiry. The caller bounds
   * the window with expiredCut first.
   */
  async *expiredRecords(window: ExpiredLeavesWindow, format: 'json' | 'ndjson'): AsyncGenerator<string> {
    const head = this.head;
    if (!head) return;
    const rows = await expiredLeaves(this.client, this.tenantId, head.tree_size, window);
    const headMember = format === 'ndjson' ? `,"tree_head":${JSON.stringify(head)}` : '';
    for (let start = 0; start < rows.length; start += BATCH) {
      const batch = rows.slice(start, start + BATCH);
      const proofs = await this.proofsAt(batch.map((row) => row.leaf_index));
      for (let index = 0; index < batch.length; index += 1) {
        const { leaf_index: leafIndex, ...row } = batch[index]!;
        const proof = proofs[index]!;
        const expired = { ...row, leaf_index: leafIndex, leaf_hash: proof.leaf_hash };
        yield `{"expired":${JSON.stringify(expired)},"proof":${JSON.stringify(proof)}${headMember}}`;
      }
    }
  }

  private async proofsAt(leafIndexes: ReadonlyArray<number | undefined>): Promise<Array<InclusionProof | undefined>> {
    const head = this.head;
    if (!head) return [];
    // Leaf-level tiles are dropped between rounds (an export's events are mostly neighbours); the few tiles
    // above them serve every event and stay.
    for (const [key, tile] of this.tiles) if (tile.level === 0) this.tiles.delete(key);
    const needed = leafIndexes
      .filter((index): index is number => index !== undefined && index < head.tree_size)
      .flatMap((index) => tilesForInclusion(index, head.tree_size))
      .filter((key) => !this.tiles.has(`${key.level}/${key.index}`));
    const unique = [...new Map(needed.map((key) => [`${key.level}/${key.index}`, key])).values()];
    for (const tile of await loadTiles(this.client, this.tenantId, unique)) this.tiles.set(`${tile.level}/${tile.index}`, tile);
    const tiles = new TileSet(this.tiles.values());
    return leafIndexes.map((index) => {
      if (index === undefined || index >= head.tree_size) return undefined;
      return {
        leaf_index: index,
        tree_size: head.tree_size,
        leaf_hash: tiles.leafHash(index).toString('hex'),
        audit_path: tiles.inclusionPath(index, head.tree_size).map((hash) => hash.toString('hex')),
      };
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      await this.client.query('ROLLBACK');
      this.client.release();
    } catch (error) {
      this.client.release(error as Error);
    }
  }
}
