/**
 * Verification of the trail's tamper evidence, for customers: every event is a leaf of its tenant's
 * append-only Merkle tree (RFC 9162 §2.1 hashing), and the service signs tree heads with Ed25519. A customer
 * who keeps signed heads can prove with these functions alone that an event they were shown is still in the
 * tree, unchanged and at its place, and that a later head extends an earlier one.
 *
 * Depends on node:crypto only, and on nothing else of this repository: it ships in the dependency-free client.
 */
import { createHash, createPublicKey, verify as verifySignature, type KeyObject } from 'node:crypto';
import { canonicalJson, canonicalObject } from './canonicalJson.ts';
import type { ConsistencyProof, InclusionProof, SignedTreeHead } from './integrityShapes.ts';
import { hashChildren, hashLeaf, hashLeafHex, sha256 } from './merkleHash.ts';

export { canonicalJson, hashChildren, hashLeaf, hashLeafHex, sha256 };
export type { ConsistencyProof, InclusionProof, SignedTreeHead };

/** A public key the customer trusts, with the window in which it may have signed (from GET /audit/integrity/keys). */
export interface TrustedKey {
  /** SPKI PEM, or a KeyObject. */
  public_key_pem: string | KeyObject;
  valid_from?: string | null;
  valid_until?: string | null;
}

export type Verification = { readonly valid: true } | { readonly valid: false; readonly reason: string };

const VALID: Verification = Object.freeze({ valid: true });
const invalid = (reason: string): Verification => ({ valid: false, reason });

const HEX_HASH = /^[0-9a-f]{64}$/;

/**
 * The leaf hash of an event: of its RFC 8785 canonical JSON. `event` is the event as the API serves it
 * (a parsed object, or its JSON text); members the export adds beside an event (`proof`, `tree_head`) must
 * be removed first (eventFromExportLine does so).
 */
export function eventLeafHash(event: string | Record<string, unknown>): string {
  return hashLeafHex(canonicalJson(typeof event === 'string' ? (JSON.parse(event) as unknown) : event));
}

/** eventLeafHash as bytes. */
export function eventLeaf(event: string | Record<string, unknown>): Buffer {
  return hashLeaf(canonicalJson(typeof event === 'string' ? (JSON.parse(event) as unknown) : event));
}

/** Members an export adds beside an event's own (docs/integrity.md). */
const EXPORT_MEMBERS: ReadonlySet<string> = new Set(['proof', 'tree_head']);

/**
 * The leaf hash (hex) of an exported event, given as the parsed NDJSON line or JSON export element: the
 * event without the members the export adds. The same as eventLeafHash(eventFromExportLine(line).event),
 * without copying the event.
 */
export function exportedEventLeafHash(exported: Record<string, unknown>): string {
  if (typeof exported !== 'object' || exported === null || Array.isArray(exported))
    throw new TypeError('an exported event must be a JSON object');
  return hashLeafHex(canonicalObject(exported, EXPORT_MEMBERS));
}

/** Splits an exported event (NDJSON line or element of the JSON export) into the event and what was added to it. */
export function eventFromExportLine(line: string | Record<string, unknown>): {
  event: Record<string, unknown>;
  proof: InclusionProof | null | undefined;
  treeHead: SignedTreeHead | null | undefined;
} {
  const { proof, tree_head: treeHead, ...event } = (typeof line === 'string' ? JSON.parse(line) : line) as Record<string, unknown>;
  return { event, proof: proof as InclusionProof | null | undefined, treeHead: treeHead as SignedTreeHead | null | undefined };
}

/** The bytes a tree head's signature covers: the RFC 8785 canonical JSON of exactly its five fields. */
export function treeHeadSigningInput(head: Omit<SignedTreeHead, 'signature'>): string {
  return canonicalJson({
    tenant_id: head.tenant_id,
    tree_size: head.tree_size,
    root_hash: head.root_hash,
    timestamp: head.timestamp,
    key_id: head.key_id,
  });
}

/** The key id the service derives from an Ed25519 public key: hex of the first 16 bytes of SHA-256 over its SPKI DER. */
export function keyIdOf(publicKey: string | KeyObject): string {
  const key = typeof publicKey === 'string' ? createPublicKey(publicKey) : publicKey;
  const der = key.export({ type: 'spki', format: 'der' });
  return createHash('sha256').update(der).digest().subarray(0, 16).toString('hex');
}

/**
 * Checks a signed tree head: the signature of a trusted key whose id it names, made within that key's
 * validity window when one is known. The key id is recomputed from each trusted key, never taken on trust.
 */
export function verifyTreeHead(head: SignedTreeHead, trustedKeys: readonly TrustedKey[]): Verification {
  if (typeof head !== 'object' || head === null) return invalid('not a tree head');
  if (!Number.isSafeInteger(head.tree_size) || head.tree_size < 0) return invalid('tree_size is not a non-negative integer');
  if (typeof head.root_hash !== 'string' || !HEX_HASH.test(head.root_hash)) return invalid('root_hash is not 64 lowercase hex digits');
  if (typeof head.timestamp !== 'string' || Number.isNaN(Date.parse(head.timestamp))) return invalid('timestamp is not a time');
  if (typeof head.signature !== 'string' || typeof head.key_id !== 'string' || typeof head.tenant_id !== 'string') {
    return invalid('tenant_id, key_id and signature must be strings');
  }
  const key = trustedKeys.find((candidate) => keyIdOf(candidate.public_key_pem) === head.key_id);
  if (!key) return invalid(`signed by key ${head.key_id}, which is not among the trusted keys`);
  const publicKey = typeof key.public_key_pem === 'string' ? createPublicKey(key.public_key_pem) : key.public_key_pem;
  const signed = verifySignature(null, Buffer.from(treeHeadSigningInput(head)), publicKey, Buffer.from(head.signature, 'base64'));
  if (!signed) return invalid('the signature does not match the tree head');
  const at = Date.parse(head.timestamp);
  if (key.valid_from && at < Date.parse(key.valid_from))
    return invalid(`signed at ${head.timestamp}, before key ${head.key_id} was valid (${key.valid_from})`);
  if (key.valid_until && at >= Date.parse(key.valid_until))
    return invalid(`signed at ${head.timestamp}, after key ${head.key_id} was retired (${key.valid_until})`);
  return VALID;
}

/** What a proof is checked against: the size and root of a tree head (verified first with verifyTreeHead). */
export interface TreeSummary {
  tree_size: number;
  root_hash: string;
}

/**
 * Checks that the leaf with this hash is at `leaf_index` of the tree of the given head, by the algorithm of
 * RFC 9162 §2.1.3.2. The size comes from the head: a proof's own tree_size proves nothing.
 *
 * `proven`, shared by the checks of many events against one head, keeps the nodes already shown to lead
 * to its root: a path that reaches one of them with the same hash is proven there (an export's neighbouring
 * events share most of their paths), and one that reaches it with another hash is refused.
 */
export function verifyInclusion(leafHash: string, proof: InclusionProof, head: TreeSummary, proven?: Map<string, string>): Verification {
  const { leaf_index: index, audit_path: path } = proof;
  const size = head.tree_size;
  if (proof.tree_size !== size) return invalid(`the proof is for tree size ${proof.tree_size}, the tree head's size is ${size}`);
  if (!Number.isSafeInteger(index) || !Number.isSafeInteger(size) || index < 0 || index >= size) {
    return invalid(`leaf_index ${index} is not inside a tree of size ${size}`);
  }
  if (!isHashList(path)) return invalid('audit_path must hold 64-hex-digit hashes');
  if (leafHash !== proof.leaf_hash) return invalid("the event does not hash to the proof's leaf_hash");
  let fn = index;
  let sn = size - 1;
  let level = 0;
  let r: Buffer = Buffer.from(leafHash, 'hex');
  // The nodes this path passes through, by level and index: remembered in `proven` once it succeeds.
  const passed: Array<[string, string]> = [];
  const reached = (): Verification | undefined => {
    if (!proven) return undefined;
    const node = `${level}/${fn}`;
    const known = proven.get(node);
    const hash = r.toString('hex');
    if (known === undefined) {
      passed.push([node, hash]);
      return undefined;
    }
    return known === hash ? VALID : invalid(`the audit path contradicts another proof against this tree head at level ${level}`);
  };
  let verdict = reached();
  if (verdict) return verdict;
  for (const hex of path) {
    if (sn === 0) return invalid('audit_path is longer than the tree allows');
    const p = Buffer.from(hex, 'hex');
    if (isOdd(fn) || fn === sn) {
      r = hashChildren(p, r);
      if (!isOdd(fn)) {
        while (!isOdd(fn) && fn !== 0) {
          fn = half(fn);
          sn = half(sn);
          level += 1;
        }
      }
    } else {
      r = hashChildren(r, p);
    }
    fn = half(fn);
    sn = half(sn);
    level += 1;
    verdict = reached();
    if (verdict) {
      if (verdict.valid) remember(proven!, passed);
      return verdict;
    }
  }
  if (sn !== 0) return invalid('audit_path is shorter than the tree requires');
  if (r.toString('hex') !== head.root_hash) return invalid("the audit path does not lead to the tree head's root hash");
  if (proven) remember(proven, passed);
  return VALID;
}

const HEX_DIGITS = /^[0-9a-f]*$/;

/** Whether a proof's list holds lowercase hex SHA-256 hashes only: one test of them all, not one per hash. */
function isHashList(path: unknown): path is string[] {
  return Array.isArray(path) && path.every((hash) => typeof hash === 'string' && hash.length === 64) && HEX_DIGITS.test(path.join(''));
}

function remember(proven: Map<string, string>, passed: ReadonlyArray<[string, string]>): void {
  for (const [node, hash] of passed) proven.set(node, hash);
}

/**
 * Checks that the tree of the first head is a prefix of the tree of the second, by the algorithm of
 * RFC 9162 §2.1.4.2. The sizes come from the heads (verified first with verifyTreeHead).
 */
export function verifyConsistency(proof: ConsistencyProof, firstHead: TreeSummary, secondHead: TreeSummary): Verification {
  const { proof: path } = proof;
  const first = firstHead.tree_size;
  const second = secondHead.tree_size;
  const firstRoot = firstHead.root_hash;
  const secondRoot = secondHead.root_hash;
  if (proof.first !== first || proof.second !== second) {
    return invalid(`the proof is between sizes ${proof.first} and ${proof.second}, the tree heads' sizes are ${first} and ${second}`);
  }
  if (!Number.isSafeInteger(first) || !Number.isSafeInteger(second) || first < 1 || first > second) {
    return invalid(`sizes ${first} and ${second} are not 1 ≤ first ≤ second`);
  }
  if (!isHashList(path)) return invalid('proof must hold 64-hex-digit hashes');
  if (first === second) {
    if (path.length !== 0) return invalid('a proof between equal sizes must be empty');
    return firstRoot === secondRoot ? VALID : invalid(`two different root hashes for tree size ${first}`);
  }
  const hashes: Buffer[] = path.map((hex) => Buffer.from(hex, 'hex'));
  if (hashes.length === 0) return invalid('the proof is empty');
  if (isPowerOfTwo(first)) hashes.unshift(Buffer.from(firstRoot, 'hex'));
  let fn = first - 1;
  let sn = second - 1;
  while (isOdd(fn)) {
    fn = half(fn);
    sn = half(sn);
  }
  let fr: Buffer = hashes[0]!;
  let sr: Buffer = hashes[0]!;
  for (const c of hashes.slice(1)) {
    if (sn === 0) return invalid('the proof is longer than the trees allow');
    if (isOdd(fn) || fn === sn) {
      fr = hashChildren(c, fr);
      sr = hashChildren(c, sr);
      if (!isOdd(fn)) {
        while (!isOdd(fn) && fn !== 0) {
          fn = half(fn);
          sn = half(sn);
        }
      }
    } else {
      sr = hashChildren(sr, c);
    }
    fn = half(fn);
    sn = half(sn);
  }
  if (sn !== 0) return invalid('the proof is shorter than the trees require');
  if (fr.toString('hex') !== firstRoot) return invalid(`the proof does not lead to the root of the tree of size ${first}`);
  if (sr.toString('hex') !== secondRoot) return invalid(`the proof does not lead to the root of the tree of size ${second}`);
  return VALID;
}

// Tree sizes may exceed 2^32, where JavaScript's bitwise operators would truncate: arithmetic instead.
function isOdd(n: number): boolean {
  return n % 2 === 1;
}

function half(n: number): number {
  return Math.floor(n / 2);
}

function isPowerOfTwo(n: number): boolean {
  while (n > 1 && n % 2 === 0) n /= 2;
  return n === 1;
}
