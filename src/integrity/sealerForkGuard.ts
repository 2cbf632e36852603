import type pg from 'pg';
import type { Database } from '../db/database.ts';
import type { Logger } from '../platform/logger.ts';
import { forkVerdict, type ForkVerdict, type LedgerHead, type SignedHeadLedger } from './forkGuard.ts';
import { lockTree, tenantsWithTrees, type TreeState } from './sealStore.ts';
import { TileSet, tilesForRanges, type Tile } from './tiles.ts';
import { loadTiles } from './treeStore.ts';
import { recordFork } from './treeForkStore.ts';

/**
 * The sealer's side of the fork guard (forkGuard.ts has the rule): reads the ledger, computes the roots the
 * rule asks for from the tree's tiles, records a consistent head in the ledger before the database commits
 * it, and stops a tenant whose tree does not extend what was signed.
 */
export class ForkGuard {
  private readonly db: Database;
  private readonly ledger: SignedHeadLedger;
  private readonly log: Logger;
  /** Tenants whose sealing stopped, and why; until an operator resolves it and restarts the sealer. */
  readonly forked = new Map<string, ForkVerdict & { consistent: false }>();

  constructor(options: { db: Database; ledger: SignedHeadLedger; log: Logger }) {
    this.db = options.db;
    this.ledger = options.ledger;
    this.log = options.log;
  }

  /**
   * Before a signature: the head about to be signed (`proposed`, for the tree `tree` plus `appendedTiles`)
   * must extend the latest one in the ledger. When it does, it is recorded there first (before the database
   * commits: a head the database then loses is still remembered; one recorded but never committed is signed
   * again, the same, by the next pass). When it does not, the tenant's sealing stops, loudly. False: do not sign.
   */
  async check(
    client: pg.PoolClient,
    tenantId: string,
    proposed: LedgerHead,
    tree: TreeState,
    appendedTiles: readonly Tile[],
  ): Promise<boolean> {
    const entry = await this.ledger.latest(tenantId);
    let ledgerRoot = '';
    if (entry && entry.head.treeSize <= proposed.treeSize) {
      const size = entry.head.treeSize;
      if (size === proposed.treeSize) ledgerRoot = proposed.rootHash;
      else if (size === tree.size && tree.root) ledgerRoot = tree.root.toString('hex');
      else {
        const tiles = new TileSet(await loadTiles(client, tenantId, tilesForRanges([{ start: 0, end: size }])));
        for (const tile of appendedTiles) tiles.add(tile);
        ledgerRoot = tiles.root(size).toString('hex');
      }
    }
    const verdict = forkVerdict(entry?.head, proposed, () => ledgerRoot);
    if (!verdict.consistent) {
      this.forked.set(tenantId, verdict);
      this.log.error(
        { tenant_id: tenantId, signed: verdict.ledger, database: verdict.proposed, reason: verdict.reason },
        'fork guard: the tree does not extend the head signed before; sealing of this tenant stopped (docs/integrity.md, The fork guard)',
      );
      await recordFork(this.db, tenantId, verdict);
      return false;
    }
    if (entry?.head.treeSize !== proposed.treeSize || entry.head.rootHash !== proposed.rootHash) {
      await this.ledger.record(tenantId, proposed, entry?.revision ?? 0);
    }
    return true;
  }

  /**
   * The check at start: every tenant's current tree against the ledger, so that a database brought back from
   * an older copy is caught even for a tenant with nothing new to seal.
   */
  async checkAll(keyId: string): Promise<void> {
    for (const tenantId of await tenantsWithTrees(this.db)) {
      await this.db.transaction(async (client) => {
        const tree = await lockTree(client, tenantId, keyId);
        if (!tree || tree.size === 0 || !tree.root) return;
        await this.check(client, tenantId, { treeSize: tree.size, rootHash: tree.root.toString('hex') }, tree, []);
      });
    }
  }
}
