import { createHash } from 'node:crypto';

/**
 * RFC 9162 §2.1 written out from the RFC's recursive definitions, independently of src/: MTH, PATH and
 * PROOF over the raw list of leaves, exactly as the RFC states them (no tiles, no iteration). Slow on
 * purpose; the tests compare the service's proofs and roots with these.
 */

const sha256 = (...parts: Uint8Array[]) => {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(part);
  return hash.digest();
};

/** k: the largest power of two smaller than n. */
function largestPowerBelow(n: number): number {
  let k = 1;
  while (k << 1 < n) k <<= 1;
  return k;
}

/** MTH(D[n]) for leaves given as their input bytes (not yet hashed). */
export function merkleTreeHash(leaves: readonly Uint8Array[]): Buffer {
  const n = leaves.length;
  if (n === 0) return sha256();
  if (n === 1) return sha256(Buffer.from([0]), leaves[0]!);
  const k = largestPowerBelow(n);
  return sha256(Buffer.from([1]), merkleTreeHash(leaves.slice(0, k)), merkleTreeHash(leaves.slice(k)));
}

/** PATH(m, D[n]). */
export function auditPath(m: number, leaves: readonly Uint8Array[]): Buffer[] {
  const n = leaves.length;
  if (n === 1) return [];
  const k = largestPowerBelow(n);
  if (m < k) return [...auditPath(m, leaves.slice(0, k)), merkleTreeHash(leaves.slice(k))];
  return [...auditPath(m - k, leaves.slice(k)), merkleTreeHash(leaves.slice(0, k))];
}

/** PROOF(m, D[n]) = SUBPROOF(m, D[n], true). */
export function consistencyProof(m: number, leaves: readonly Uint8Array[]): Buffer[] {
  return subproof(m, leaves, true);
}

function subproof(m: number, leaves: readonly Uint8Array[], b: boolean): Buffer[] {
  const n = leaves.length;
  if (m === n) return b ? [] : [merkleTreeHash(leaves)];
  const k = largestPowerBelow(n);
  if (m <= k) return [...subproof(m, leaves.slice(0, k), b), merkleTreeHash(leaves.slice(k))];
  return [...subproof(m - k, leaves.slice(k), false), merkleTreeHash(leaves.slice(0, k))];
}
