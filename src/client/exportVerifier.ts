/**
 * Offline verification of an export made with `proofs=true` (docs/integrity.md), for `audit-trail verify`
 * and for customers' own code: every event's inclusion proof, the signatures of the export's head and of
 * the heads the customer kept, and that all those heads describe one append-only history.
 *
 * Depends on node:crypto (through integrity.ts) only: part of the dependency-free client.
 */
import {
  exportedEventLeafHash,
  verifyConsistency,
  verifyInclusion,
  verifyTreeHead,
  type ConsistencyProof,
  type InclusionProof,
  type SignedTreeHead,
  type TrustedKey,
} from './integrity.ts';
import { checkExpiredLeaves, isExpiredRecord, type ExpiredLeafReport } from './expiredLeaves.ts';
import { checkRedactions, redactionClaim, type RedactedEventReport, type RedactionClaim } from './redactedEvents.ts';

export type { ExpiredLeafReport, RedactedEventReport };

export interface ExportVerificationInput {
  /** The export's body: the JSON object, or NDJSON text. */
  exportText: string;
  trustedKeys: readonly TrustedKey[];
  /** Heads the customer kept earlier. */
  savedHeads?: readonly SignedTreeHead[];
  /** Consistency proofs fetched from GET /audit/integrity/consistency, linking saved heads and the export's. */
  consistencyProofs?: readonly ConsistencyProof[];
  /**
   * The export is the tenant's whole trail (no filters; a truncated export continued page by page with
   * `until`, the pages' lines in one text): every leaf below the head must be in it. Pages made at different
   * times carry different heads (each page's audit.export event is sealed before the next page); then every
   * leaf below the smallest head must be in it, which is the whole trail as of the earliest page, and the
   * heads must be linked by consistency proofs, so that all pages show one history. Pages exported with
   * `tree_size` set to the first page's head carry that one head.
   */
  complete?: boolean;
}

export interface ExportFailure {
  /** The event concerned, when the failure is about one. */
  eventId?: string;
  reason: string;
}

export interface ExportVerificationReport {
  events: number;
  /** Events whose content was proven (redacted events are not among them). */
  proven: number;
  /** Redacted events: position and leaf proven, content not re-verifiable (docs/retention.md). */
  redacted: RedactedEventReport[];
  /** Leaves of expired events (their retention over): leaf and position proven, content gone (docs/integrity.md). */
  expired: ExpiredLeafReport[];
  /** Events committed after the export's head: no proof yet. */
  unsealed: number;
  head: SignedTreeHead | undefined;
  savedHeads: number;
  failures: ExportFailure[];
}

interface ExportedEvent {
  /** The parsed line or element: the event's members, and the proof (and head) the export added. */
  exported: Record<string, unknown>;
  proof: InclusionProof | null | undefined;
  head: SignedTreeHead | null | undefined;
}

/** Reads either export format into events with their proofs and heads; each line is parsed once. */
function readExport(text: string): ExportedEvent[] {
  let whole: unknown;
  try {
    whole = JSON.parse(text);
  } catch {
    // NDJSON: more than one JSON value.
  }
  if (typeof whole === 'object' && whole !== null && Array.isArray((whole as { events?: unknown }).events))
    return readJsonExport(whole as Record<string, unknown>);
  const events: ExportedEvent[] = [];
  // Every line of one export carries the same head: parsed once, and the same object for all its lines.
  const heads = new Map<string, SignedTreeHead | null>();
  for (let start = 0; start < text.length; ) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    const line = text.slice(start, end);
    start = end + 1;
    if (line.trim() === '') continue;
    const exported = JSON.parse(line) as Record<string, unknown>;
    if (typeof exported !== 'object' || exported === null || Array.isArray(exported)) throw new TypeError('a line is not a JSON object');
    events.push({ exported, proof: exported.proof as InclusionProof | null | undefined, head: sharedHead(exported.tree_head, heads) });
  }
  return events;
}

function sharedHead(head: unknown, heads: Map<string, SignedTreeHead | null>): SignedTreeHead | null | undefined {
  if (typeof head !== 'object' || head === null) return head as null | undefined;
  const key = JSON.stringify(head);
  let shared = heads.get(key);
  if (shared === undefined) {
    shared = head as SignedTreeHead;
    heads.set(key, shared);
  }
  return shared;
}

function readJsonExport(parsed: Record<string, unknown>): ExportedEvent[] {
  const head = (parsed.tree_head ?? undefined) as SignedTreeHead | null | undefined;
  // The records of expired leaves follow the events, in their own member.
  const expired = Array.isArray(parsed.expired) ? (parsed.expired as Array<Record<string, unknown>>) : [];
  return [...(parsed.events as Array<Record<string, unknown>>), ...expired].map((exported) => ({
    exported,
    proof: exported?.proof as InclusionProof | null | undefined,
    head,
  }));
}

const describeHead = (head: SignedTreeHead) => `the tree head of size ${head.tree_size} signed at ${head.timestamp}`;

export function verifyExport(input: ExportVerificationInput): ExportVerificationReport {
  const failures: ExportFailure[] = [];
  let exported: ExportedEvent[];
  let expiredRecords: ExportedEvent[];
  try {
    const read = readExport(input.exportText);
    exported = read.filter((line) => !isExpiredRecord(line.exported));
    expiredRecords = read.filter((line) => isExpiredRecord(line.exported));
  } catch (error) {
    const failures = [{ reason: `the export is not JSON or NDJSON: ${(error as Error).message}` }];
    return { events: 0, proven: 0, redacted: [], expired: [], unsealed: 0, head: undefined, savedHeads: 0, failures };
  }

  // The heads the export carries (one, unless NDJSON lines were mixed from several exports), by identity:
  // readExport gives the lines of one head one object, and a head that differs in any field another.
  const heads = new Set<SignedTreeHead>();
  for (const { head } of [...exported, ...expiredRecords]) if (head) heads.add(head);
  const headVerdicts = new Map<SignedTreeHead, boolean>();
  for (const head of heads) {
    const verdict = verifyTreeHead(head, input.trustedKeys);
    headVerdicts.set(head, verdict.valid);
    if (!verdict.valid) failures.push({ reason: `${describeHead(head)} in the export: ${verdict.reason}` });
  }

  let proven = 0;
  let unsealed = 0;
  // Per head: the nodes already proven to lead to its root (verifyInclusion's `proven`).
  const provenNodes = new Map<SignedTreeHead, Map<string, string>>();
  const leafOwners = new Map<number, string>();
  const redacted: Array<{ eventId: string; claim: RedactionClaim }> = [];
  const provenEvents: Array<Record<string, unknown>> = [];
  for (const { exported: event, proof, head } of exported) {
    const eventId = typeof event.event_id === 'string' ? event.event_id : '(no event_id)';
    if (proof === null || proof === undefined) {
      unsealed += 1;
      continue;
    }
    if (!head) {
      failures.push({ eventId, reason: 'the event has a proof but the export has no tree head' });
      continue;
    }
    // A redacted event is proven by the leaf hash it was sealed with, which its content no longer yields.
    const claim = redactionClaim(event);
    if (typeof claim === 'string') {
      failures.push({ eventId, reason: `the event is not a valid redaction: ${claim}` });
      continue;
    }
    let leafHash: string;
    try {
      leafHash = claim?.leafHash ?? exportedEventLeafHash(event);
    } catch (error) {
      failures.push({ eventId, reason: `the event cannot be canonicalised: ${(error as Error).message}` });
      continue;
    }
    let nodes = provenNodes.get(head);
    if (!nodes) {
      nodes = new Map();
      provenNodes.set(head, nodes);
    }
    const verdict = verifyInclusion(leafHash, proof, head, nodes);
    if (!verdict.valid) {
      failures.push({ eventId, reason: verdict.reason });
      continue;
    }
    const owner = leafOwners.get(proof.leaf_index);
    if (owner !== undefined && owner !== eventId)
      failures.push({ eventId, reason: `event ${owner} claims the same leaf ${proof.leaf_index}` });
    leafOwners.set(proof.leaf_index, eventId);
    if (!headVerdicts.get(head)) continue;
    if (claim) {
      redacted.push({ eventId, claim });
    } else {
      proven += 1;
      provenEvents.push(event);
    }
  }
  const { reports: redactedReports, failures: unrecorded } = checkRedactions(redacted, provenEvents, input.complete === true);
  failures.push(...unrecorded);
  const exportedIds = new Set(exported.map(({ exported: event }) => event.event_id).filter((id) => typeof id === 'string'));
  const expired = checkExpiredLeaves(expiredRecords, { provenNodes, headVerdicts, leafOwners, exportedIds });
  failures.push(...expired.failures);

  // Largest first: the head the others must be consistent with.
  const exportHeads = [...heads.values()].sort((a, b) => b.tree_size - a.tree_size);
  const exportHead = exportHeads[0];
  // The trail as of the earliest page: every leaf below the smallest head (the largest, for one page).
  const completeAsOf = exportHeads.filter((head) => headVerdicts.get(head)).at(-1) ?? exportHead;
  if (input.complete && completeAsOf)
    failures.push(...missingLeaves(completeAsOf, (index) => leafOwners.has(index) || expired.expired.has(index)));

  const saved = input.savedHeads ?? [];
  const validExportHeads = exportHeads.filter((head) => headVerdicts.get(head));
  failures.push(...checkHistory(saved, validExportHeads, input.trustedKeys, input.consistencyProofs ?? []));
  const expiredReports = [...expired.expired.values()];
  return {
    events: exported.length,
    proven,
    redacted: redactedReports,
    expired: expiredReports,
    unsealed,
    head: exportHead,
    savedHeads: saved.length,
    failures,
  };
}

/** --complete: every leaf below the head must be an event of the export or a proven expired leaf. */
function missingLeaves(head: SignedTreeHead, covered: (index: number) => boolean): ExportFailure[] {
  const missing: number[] = [];
  for (let index = 0; index < head.tree_size && missing.length <= 20; index += 1) if (!covered(index)) missing.push(index);
  if (missing.length === 0) return [];
  const listed = `${missing.slice(0, 20).join(', ')}${missing.length > 20 ? ', ...' : ''}`;
  return [{ reason: `the export is said to be complete but lacks the events of leaves ${listed} of ${describeHead(head)}` }];
}

/**
 * The kept heads and the export's must be signed, of one tenant, and describe one append-only history:
 * heads of one size must have one root, and each kept head, and each other head of the export (pages made
 * at different times), must be consistent with the export's largest head by a consistency proof (RFC 9162
 * §2.1.4). `exportHeads` are the export's heads whose signatures were checked, largest first.
 */
function checkHistory(
  saved: readonly SignedTreeHead[],
  exportHeads: readonly SignedTreeHead[],
  trustedKeys: readonly TrustedKey[],
  proofs: readonly ConsistencyProof[],
): ExportFailure[] {
  const failures: ExportFailure[] = [];
  const valid: SignedTreeHead[] = [];
  for (const head of saved) {
    const verdict = verifyTreeHead(head, trustedKeys);
    if (verdict.valid) valid.push(head);
    else failures.push({ reason: `saved ${describeHead(head)}: ${verdict.reason}` });
  }
  const all = [...valid, ...exportHeads];
  const tenants = new Set(all.map((head) => head.tenant_id));
  if (tenants.size > 1) failures.push({ reason: `the tree heads belong to several tenants (${[...tenants].join(', ')})` });
  const bySize = new Map<number, SignedTreeHead>();
  for (const head of all) {
    const other = bySize.get(head.tree_size);
    if (other && other.root_hash !== head.root_hash) {
      failures.push({
        reason: `two different tree heads for size ${head.tree_size}: signed at ${other.timestamp} and at ${head.timestamp}`,
      });
    }
    bySize.set(head.tree_size, head);
  }
  const target = exportHeads[0];
  if (!target) return failures;
  for (const head of [...valid, ...exportHeads.slice(1)]) {
    if (head.tree_size === target.tree_size) continue;
    const [first, second] = head.tree_size < target.tree_size ? [head, target] : [target, head];
    const proof = proofs.find((candidate) => candidate.first === first.tree_size && candidate.second === second.tree_size);
    if (!proof) {
      failures.push({
        reason: `no consistency proof between sizes ${first.tree_size} and ${second.tree_size}: save GET /audit/integrity/consistency?first=${first.tree_size}&second=${second.tree_size} and pass it with --consistency`,
      });
      continue;
    }
    const verdict = verifyConsistency(proof, first, second);
    if (!verdict.valid)
      failures.push({ reason: `${describeHead(first)} and ${describeHead(second)} are not consistent: ${verdict.reason}` });
  }
  return failures;
}
