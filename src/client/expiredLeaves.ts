/**
 * Expired events as a verifier sees them (docs/integrity.md "Expired events"). An export with proofs lists,
 * after its events, a record for each leaf below its tree head whose event expired (its retention period
 * over): `{"expired": {event_id, timestamp, leaf_index, leaf_hash, expired_at, retain, source}, "proof": …}`.
 * The tree keeps every leaf's hash, so the leaf and its position are proven by the inclusion proof; the
 * content is gone and cannot be. A verifier reports such a leaf as expired, never as missing or tampered.
 *
 * What a record cannot do is hide an event that is still served: an event of the export that holds the
 * same leaf, or the same event id, contradicts it, and the record is a failure.
 *
 * Dependency-free: part of the client package.
 */
import { verifyInclusion, type InclusionProof, type SignedTreeHead } from './integrity.ts';

export interface ExpiredLeafClaim {
  readonly eventId: string;
  readonly timestamp: string;
  readonly leafIndex: number;
  readonly leafHash: string;
  readonly expiredAt: string;
  readonly retain: string;
  readonly source: string;
}

/** An expired leaf whose position and leaf hash were proven against the export's head; its content is gone. */
export type ExpiredLeafReport = ExpiredLeafClaim;

const LEAF_HASH = /^[0-9a-f]{64}$/;

/** Whether an exported line or element is an expired leaf's record rather than an event. */
export function isExpiredRecord(exported: Record<string, unknown>): boolean {
  return Object.hasOwn(exported, 'expired') && !Object.hasOwn(exported, 'event_id');
}

/** The record's claim, or the reason it is malformed. */
export function expiredLeafClaim(record: Record<string, unknown>): ExpiredLeafClaim | string {
  const member = record.expired;
  if (typeof member !== 'object' || member === null || Array.isArray(member)) return 'its expired member is not an object';
  const { event_id, timestamp, leaf_index, leaf_hash, expired_at, retain, source } = member as Record<string, unknown>;
  if (typeof event_id !== 'string' || event_id === '') return 'it names no event_id';
  if (!Number.isSafeInteger(leaf_index) || (leaf_index as number) < 0) return 'its leaf_index is not a whole number';
  if (typeof leaf_hash !== 'string' || !LEAF_HASH.test(leaf_hash)) return 'its leaf_hash is not 64 hex digits';
  for (const [name, value] of Object.entries({ timestamp, expired_at, retain, source }))
    if (typeof value !== 'string') return `its ${name} is not a string`;
  return {
    eventId: event_id,
    timestamp: timestamp as string,
    leafIndex: leaf_index as number,
    leafHash: leaf_hash,
    expiredAt: expired_at as string,
    retain: retain as string,
    source: source as string,
  };
}

/**
 * Records of one leaf seen before (an export continued page by page repeats them): the same claim again is
 * not a new leaf; a different one for the same leaf is a contradiction, returned as the reason.
 */
export function repeatedClaim(seen: ExpiredLeafClaim, claim: ExpiredLeafClaim): string | undefined {
  if (seen.leafHash === claim.leafHash && seen.eventId === claim.eventId) return undefined;
  return `two records say leaf ${claim.leafIndex} expired, for events ${seen.eventId} and ${claim.eventId}`;
}

interface ExportedRecord {
  readonly exported: Record<string, unknown>;
  readonly proof: InclusionProof | null | undefined;
  readonly head: SignedTreeHead | null | undefined;
}

export interface ExpiredLeavesContext {
  /** Per head, the nodes already proven to lead to its root (verifyInclusion's `proven`). */
  readonly provenNodes: Map<SignedTreeHead, Map<string, string>>;
  readonly headVerdicts: ReadonlyMap<SignedTreeHead, boolean>;
  /** Leaf index → the id of the exported event proven at it. */
  readonly leafOwners: ReadonlyMap<number, string>;
  /** Every event id the export serves. */
  readonly exportedIds: ReadonlySet<string>;
}

/** Proves each record's leaf and checks that no served event contradicts it: the expired leaves by index. */
export function checkExpiredLeaves(
  records: readonly ExportedRecord[],
  context: ExpiredLeavesContext,
): { expired: Map<number, ExpiredLeafClaim>; failures: Array<{ eventId?: string; reason: string }> } {
  const failures: Array<{ eventId?: string; reason: string }> = [];
  const expired = new Map<number, ExpiredLeafClaim>();
  for (const { exported, proof, head } of records) {
    const claim = expiredLeafClaim(exported);
    if (typeof claim === 'string') {
      failures.push({ reason: `a record of an expired leaf is malformed: ${claim}` });
      continue;
    }
    const fail = (reason: string) => failures.push({ eventId: claim.eventId, reason: `the record that its leaf expired: ${reason}` });
    if (!proof || !head) {
      fail(proof ? 'the export has no tree head' : 'it has no proof');
      continue;
    }
    if (proof.leaf_index !== claim.leafIndex) {
      fail(`its proof is for leaf ${proof.leaf_index}, not leaf ${claim.leafIndex}`);
      continue;
    }
    let nodes = context.provenNodes.get(head);
    if (!nodes) {
      nodes = new Map();
      context.provenNodes.set(head, nodes);
    }
    const verdict = verifyInclusion(claim.leafHash, proof, head, nodes);
    if (!verdict.valid) {
      fail(verdict.reason);
      continue;
    }
    const owner = context.leafOwners.get(claim.leafIndex);
    if (owner !== undefined) {
      fail(`event ${owner} of the export is proven at leaf ${claim.leafIndex}, so that leaf's event did not expire`);
      continue;
    }
    if (context.exportedIds.has(claim.eventId)) {
      fail('the export serves that event, so it did not expire');
      continue;
    }
    const seen = expired.get(claim.leafIndex);
    const repeated = seen && repeatedClaim(seen, claim);
    if (repeated) fail(repeated);
    if (seen || !context.headVerdicts.get(head)) continue;
    expired.set(claim.leafIndex, claim);
  }
  return { expired, failures };
}
