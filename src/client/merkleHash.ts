/**
 * The hashes of RFC 9162 §2.1.1 that the trail's Merkle trees are made of: a leaf is SHA-256(0x00 ‖ leaf), an
 * interior node SHA-256(0x01 ‖ left ‖ right). Shared by the customer's verifier (integrity.ts, which exports
 * them to the package's users) and the service's sealer; hot on both paths, hence the care below.
 *
 * Depends on node:crypto only: it ships in the dependency-free client.
 */
import * as crypto from 'node:crypto';
import { createHash } from 'node:crypto';

const LEAF_PREFIX = Buffer.from([0x00]);
const NODE_PREFIX = Buffer.from([0x01]);

// crypto.hash (Node 21.7 and 20.12) hashes in one call, faster than a Hash object for the few hundred
// bytes of an event; createHash where it is missing. Its digest is taken as hex and decoded: asking it for
// a Buffer goes through a slow check of the encoding name that costs several times the hashing itself
// (BENCHMARKS.md, "Tamper evidence (issue 18)", Hashing), and the sealer hashes about three times per event,
// a verifier about twenty per proof.
const oneShotHash = (crypto as { hash?: (algorithm: string, data: string | Uint8Array) => string }).hash;

/** SHA-256(0x00 ‖ leaf): the hash of one leaf (RFC 9162 §2.1.1). */
export function hashLeaf(leaf: string | Uint8Array): Buffer {
  if (oneShotHash && typeof leaf === 'string') return Buffer.from(hashLeafHex(leaf), 'hex');
  return createHash('sha256').update(LEAF_PREFIX).update(leaf).digest();
}

/** hashLeaf as lowercase hex, the form proofs carry. */
export function hashLeafHex(leaf: string | Uint8Array): string {
  // U+0000 is the single byte 0x00 in UTF-8.
  if (oneShotHash && typeof leaf === 'string') return oneShotHash('sha256', `\u0000${leaf}`);
  return createHash('sha256').update(LEAF_PREFIX).update(leaf).digest('hex');
}

/** SHA-256 of bytes already prefixed (0x00 for a leaf, 0x01 for a node), decoded from hex. */
export function sha256(bytes: Uint8Array): Buffer {
  return oneShotHash ? Buffer.from(oneShotHash('sha256', bytes), 'hex') : createHash('sha256').update(bytes).digest();
}

// 0x01 ‖ left ‖ right, filled for each interior node: crypto.hash reads it before returning.
const nodeInput = Buffer.alloc(65, 1);

/** SHA-256(0x01 ‖ left ‖ right): the hash of an interior node (RFC 9162 §2.1.1). */
export function hashChildren(left: Uint8Array, right: Uint8Array): Buffer {
  if (oneShotHash && left.length === 32 && right.length === 32) {
    nodeInput.set(left, 1);
    nodeInput.set(right, 33);
    return Buffer.from(oneShotHash('sha256', nodeInput), 'hex');
  }
  return createHash('sha256').update(NODE_PREFIX).update(left).update(right).digest();
}
