/**
 * The shapes of the trail's tamper evidence as the API serves them (docs/integrity.md): types only, so
 * that the portal's browser code can name them without the verifier's node:crypto.
 */

/** A signed tree head as the API serves it. */
export interface SignedTreeHead {
  tenant_id: string;
  tree_size: number;
  /** Lowercase hex of the tree's root hash. */
  root_hash: string;
  /** ISO 8601 UTC with milliseconds. */
  timestamp: string;
  key_id: string;
  /** Base64 Ed25519 signature over treeHeadSigningInput(head). */
  signature: string;
}

export interface InclusionProof {
  leaf_index: number;
  tree_size: number;
  leaf_hash: string;
  audit_path: string[];
}

export interface ConsistencyProof {
  first: number;
  second: number;
  proof: string[];
}
