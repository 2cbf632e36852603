/**
 * One log, one history (docs/integrity.md "The fork guard"). A signed head is a promise to everyone who saw
 * it, so the sealer never signs a head that does not extend the latest one it signed for that tenant. The
 * database alone cannot tell: after a promoted asynchronous standby or a restore from backup it has simply
 * forgotten its last heads, and would sign different ones for the same sizes. So the latest signed head of
 * each tenant is also kept outside the primary's fate (SignedHeadLedger: a replicated JetStream stream), and
 * each new head is checked against it before it is signed. The decision is pure; the sealer does the I/O.
 */

export interface LedgerHead {
  readonly treeSize: number;
  /** Lowercase hex. */
  readonly rootHash: string;
}

/** The latest head recorded for a tenant, and the revision a conditional write must name. */
export interface LedgerEntry {
  readonly head: LedgerHead;
  readonly revision: number;
}

/** Where the latest signed head of each tenant survives the database (declared here, implemented on the bus). */
export interface SignedHeadLedger {
  latest(tenantId: string): Promise<LedgerEntry | undefined>;
  /**
   * Records a head only if the ledger still holds `revision` for the tenant (0: nothing yet); throws
   * LedgerConflictError otherwise (another sealer signed in between).
   */
  record(tenantId: string, head: LedgerHead, revision: number): Promise<void>;
}

export class LedgerConflictError extends Error {
  override name = 'LedgerConflictError';
}

export type ForkVerdict =
  | { readonly consistent: true }
  | { readonly consistent: false; readonly reason: string; readonly ledger: LedgerHead; readonly proposed: LedgerHead };

/**
 * Whether a head of `proposed` may be signed after `ledger`, the latest head signed before. `rootAt(size)`
 * is the root of the tree the new head is for, at an earlier size (from its tiles). Consistent when there
 * is no earlier head, or when the new tree at the earlier size has the earlier root; a smaller new head is
 * never consistent: the leaves between are gone from this database, and would be replaced by others.
 */
export function forkVerdict(ledger: LedgerHead | undefined, proposed: LedgerHead, rootAt: (size: number) => string): ForkVerdict {
  if (!ledger) return { consistent: true };
  if (ledger.treeSize > proposed.treeSize) {
    return {
      consistent: false,
      ledger,
      proposed,
      reason: `a head of ${ledger.treeSize} leaves was signed, but the database's tree has only ${proposed.treeSize}: it lost its last commits`,
    };
  }
  if (rootAt(ledger.treeSize) !== ledger.rootHash) {
    return {
      consistent: false,
      ledger,
      proposed,
      reason: `the database's tree at ${ledger.treeSize} leaves is not the tree the head signed for that size: its history differs`,
    };
  }
  return { consistent: true };
}
