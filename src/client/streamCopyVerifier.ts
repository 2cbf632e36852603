/**
 * Offline verification of a log stream's copy (docs/streams.md, "Checking a SIEM copy"): the records a
 * destination received — the NDJSON of an HTTPS collector's batches or of the S3 objects, native or OCSF —
 * checked against the signed tree heads the batches carry. Per tenant, the events are put back at their
 * leaf indexes (repeats of an at-least-once delivery dropped, once their content is found identical), and
 * for every signed head whose leaves the copy holds from leaf 0 on, the Merkle root of those leaves is
 * computed (RFC 9162 §2.1.1) and compared with the signed root: a match proves that the copy holds exactly
 * the trail the service signed, nothing changed, removed or reordered. A copy that does not start at the
 * tenant's first event, or was filtered, cannot be checked this way, and the report says so.
 *
 * Depends on node:crypto (through integrity.ts) only: part of the dependency-free client.
 */
import { eventLeafHash, hashChildren, verifyTreeHead, type SignedTreeHead, type TrustedKey } from './integrity.ts';
import { checkRedactions, redactionClaim, type RedactedEventReport, type RedactionClaim } from './redactedEvents.ts';

export interface StreamCopyInput {
  /**
   * The copy: NDJSON records, as many files' texts as there are (their order does not matter). Read once,
   * in order, so a caller can hand over one file at a time and a copy of any number of files is never in
   * memory whole.
   */
  readonly texts: Iterable<string>;
  readonly trustedKeys: readonly TrustedKey[];
  /** Heads the customer kept (GET /audit/integrity/tree-head): checked against the copy like the copy's own. */
  readonly savedHeads?: readonly SignedTreeHead[];
}

export interface StreamCopyFailure {
  readonly tenantId?: string;
  readonly reason: string;
}

export interface TenantCopyReport {
  readonly tenantId: string;
  /** Distinct events (leaves) in the copy. */
  readonly events: number;
  /** Records that repeated an event already in the copy (at-least-once delivery). */
  readonly repeats: number;
  /** The largest head whose root the copy's leaves reproduce; every leaf below it is proven. */
  readonly verifiedHead: SignedTreeHead | undefined;
  /** Events at or past the verified head's size: in the copy, not yet covered by a head it carries. */
  readonly uncovered: number;
  /** Events the copy holds redacted (docs/retention.md): their leaf and position are proven, not their content. */
  readonly redacted: RedactedEventReport[];
}

export interface StreamCopyReport {
  readonly records: number;
  readonly tenants: TenantCopyReport[];
  readonly failures: StreamCopyFailure[];
}

interface TenantCopy {
  readonly leaves: Map<number, string>;
  readonly heads: Map<string, SignedTreeHead>;
  repeats: number;
  readonly redacted: Array<{ eventId: string; claim: RedactionClaim }>;
  /** The admin.event.redact events, which must record every redaction. */
  readonly redactionEvents: Array<Record<string, unknown>>;
}

/** The event and its leaf index in one record of either format; undefined for a record that is not an event. */
function eventOf(record: Record<string, unknown>): { tenantId: string; leaf: number; event: Record<string, unknown> } | undefined {
  if (typeof record.raw_data === 'string' && typeof record.metadata === 'object' && record.metadata !== null) {
    // OCSF: the served event whole in raw_data, its leaf index in metadata.sequence.
    const event = JSON.parse(record.raw_data) as Record<string, unknown>;
    const leaf = (record.metadata as Record<string, unknown>).sequence;
    return { tenantId: String(event.tenant_id), leaf: Number(leaf), event };
  }
  if (typeof record.event_id !== 'string') return undefined;
  // Native: the served event with leaf_index appended.
  const { leaf_index: leaf, ...event } = record;
  return { tenantId: String(event.tenant_id), leaf: Number(leaf), event };
}

function readCopy(texts: Iterable<string>, failures: StreamCopyFailure[]): { copies: Map<string, TenantCopy>; records: number } {
  const copies = new Map<string, TenantCopy>();
  const copyOf = (tenantId: string) => {
    let copy = copies.get(tenantId);
    if (!copy) {
      copy = { leaves: new Map(), heads: new Map(), repeats: 0, redacted: [], redactionEvents: [] };
      copies.set(tenantId, copy);
    }
    return copy;
  };
  let records = 0;
  for (const text of texts) {
    for (const line of text.split('\n')) {
      if (line.trim() === '') continue;
      records += 1;
      let record: Record<string, unknown>;
      try {
        record = JSON.parse(line) as Record<string, unknown>;
      } catch {
        failures.push({ reason: `record ${records} is not JSON` });
        continue;
      }
      if (typeof record.tree_head === 'object' && record.tree_head !== null) {
        const head = record.tree_head as SignedTreeHead;
        copyOf(head.tenant_id).heads.set(`${head.tree_size}:${head.root_hash}:${head.signature}`, head);
        continue;
      }
      const found = eventOf(record);
      if (!found) continue; // a test record (stream_test), which is no part of the trail
      if (!Number.isSafeInteger(found.leaf) || found.leaf < 0) {
        failures.push({ tenantId: found.tenantId, reason: `event ${String(found.event.event_id)} has no leaf index` });
        continue;
      }
      const copy = copyOf(found.tenantId);
      // A redacted event carries the leaf hash it was sealed with; its content no longer yields it.
      const claim = redactionClaim(found.event);
      if (typeof claim === 'string') {
        failures.push({ tenantId: found.tenantId, reason: `event ${String(found.event.event_id)} is not a valid redaction: ${claim}` });
        continue;
      }
      const hash = claim?.leafHash ?? eventLeafHash(found.event);
      const before = copy.leaves.get(found.leaf);
      if (before === undefined) {
        copy.leaves.set(found.leaf, hash);
        if (claim) copy.redacted.push({ eventId: String(found.event.event_id), claim });
        else if (found.event.action === 'admin.event.redact') copy.redactionEvents.push(found.event);
      } else if (before === hash) copy.repeats += 1;
      else failures.push({ tenantId: found.tenantId, reason: `two different events at leaf ${found.leaf}` });
    }
  }
  return { copies, records };
}

/** RFC 9162 MTH over leaves [start, start + size), complete subtrees remembered: heads of many sizes share them. */
function subtreeHash(leaves: Map<number, string>, start: number, size: number, memo: Map<string, Buffer>): Buffer {
  if (size === 1) return hashLeafOf(leaves.get(start)!);
  const complete = (size & (size - 1)) === 0;
  const key = `${start}:${size}`;
  if (complete) {
    const known = memo.get(key);
    if (known) return known;
  }
  let split = 1;
  while (split * 2 < size) split *= 2;
  const hash = hashChildren(subtreeHash(leaves, start, split, memo), subtreeHash(leaves, start + split, size - split, memo));
  if (complete) memo.set(key, hash);
  return hash;
}

/** The leaf hashes are kept as hex: back to bytes for the node hashes. */
function hashLeafOf(hex: string): Buffer {
  return Buffer.from(hex, 'hex');
}

function verifyTenant(tenantId: string, copy: TenantCopy, input: StreamCopyInput, failures: StreamCopyFailure[]): TenantCopyReport {
  let contiguous = 0;
  while (copy.leaves.has(contiguous)) contiguous += 1;
  const heads = [...copy.heads.values(), ...(input.savedHeads ?? []).filter((head) => head.tenant_id === tenantId)];
  const memo = new Map<string, Buffer>();
  let verifiedHead: SignedTreeHead | undefined;
  for (const head of heads.sort((a, b) => a.tree_size - b.tree_size)) {
    const signature = verifyTreeHead(head, input.trustedKeys);
    if (!signature.valid) {
      failures.push({ tenantId, reason: `the tree head of size ${head.tree_size}: ${signature.reason}` });
      continue;
    }
    if (head.tree_size === 0 || head.tree_size > contiguous) continue;
    const root = subtreeHash(copy.leaves, 0, head.tree_size, memo).toString('hex');
    if (root !== head.root_hash) {
      failures.push({
        tenantId,
        reason: `the copy's first ${head.tree_size} events do not reproduce the root of the tree head of size ${head.tree_size} signed at ${head.timestamp}: an event was changed, removed or reordered`,
      });
      continue;
    }
    verifiedHead = head;
  }
  if (!verifiedHead && copy.leaves.size > 0) {
    const first = lowestLeaf(copy.leaves);
    const why =
      contiguous === 0
        ? `the copy starts at leaf ${first}, not at the tenant's first event (leaf 0)`
        : `the copy holds leaves 0 to ${contiguous - 1} only, and every signed head it carries is larger`;
    failures.push({
      tenantId,
      reason: `nothing could be verified: ${why}. A copy is checkable offline when it holds the tenant's trail from its first event, unfiltered (a stream with start_at before the first event and no filter).`,
    });
  }
  const size = verifiedHead?.tree_size ?? 0;
  const uncovered = [...copy.leaves.keys()].filter((leaf) => leaf >= size).length;
  // The copy holds the whole trail from its first event, so every redaction's admin.event.redact event too.
  const redactions = checkRedactions(copy.redacted, copy.redactionEvents, true);
  for (const { eventId, reason } of redactions.failures) failures.push({ tenantId, reason: `event ${eventId}: ${reason}` });
  return { tenantId, events: copy.leaves.size, repeats: copy.repeats, verifiedHead, uncovered, redacted: redactions.reports };
}

/** The lowest leaf index held; a loop, since spreading a copy's keys as arguments overflows the stack past ~125k. */
function lowestLeaf(leaves: Map<number, string>): number {
  let lowest = Number.POSITIVE_INFINITY;
  for (const leaf of leaves.keys()) if (leaf < lowest) lowest = leaf;
  return lowest;
}

export function verifyStreamCopy(input: StreamCopyInput): StreamCopyReport {
  const failures: StreamCopyFailure[] = [];
  const { copies, records } = readCopy(input.texts, failures);
  if (copies.size === 0) failures.push({ reason: 'the copy holds no event and no tree head' });
  const tenants = [...copies.entries()]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([tenantId, copy]) => verifyTenant(tenantId, copy, input, failures));
  return { records, tenants, failures };
}
