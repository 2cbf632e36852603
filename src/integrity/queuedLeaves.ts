import { documentLeaf } from './documentLeaf.ts';
import type { LeafRange } from './sealStore.ts';
import type { QueueRow, QueuedEvent } from './sealQueueStore.ts';
import { HASH_BYTES } from './tiles.ts';

/**
 * The leaves of the queue rows a sealer took, in order, and the range each row's leaves take from `firstLeaf`
 * on; decided without I/O (the sealer reads the rows and, for rows without hashes, their events). A row's
 * leaf hashes are its writer's (the write path computed them from the document it stored); the events of a
 * row without them are hashed here from `documents`, leaving out events that are gone (`missing`: only a
 * store altered behind the service's back has them). A row none of whose events remain takes no range.
 */
export function queuedLeaves(
  rows: readonly QueueRow[],
  documents: readonly QueuedEvent[],
  firstLeaf: number,
): { readonly ranges: LeafRange[]; readonly leaves: Buffer; readonly missing: string[] } {
  const byRow = groupByQueueRow(documents);
  const ranges: LeafRange[] = [];
  const chunks: Buffer[] = [];
  const missing: string[] = [];
  let count = 0;
  for (const row of rows) {
    let leaves = row.leafHashes;
    let partial = false;
    if (!leaves) {
      const events = byRow.get(row.queueId) ?? [];
      const present = events.filter((event) => event.document !== undefined);
      partial = present.length < events.length;
      for (const event of events) if (event.document === undefined) missing.push(event.missingKey!.eventId);
      leaves = Buffer.concat(present.map((event) => documentLeaf(event.document!)));
    }
    if (leaves.length === 0) continue;
    ranges.push({ queueId: row.queueId, firstLeaf: firstLeaf + count, partial });
    chunks.push(leaves);
    count += leaves.length / HASH_BYTES;
  }
  return { ranges, leaves: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks), missing };
}

/** The rows whose events must be read back and hashed: those their writer gave no leaf hashes. */
export function rowsWithoutHashes(rows: readonly QueueRow[]): number[] {
  return rows.filter((row) => row.leafHashes === undefined).map((row) => row.queueId);
}

function groupByQueueRow(events: readonly QueuedEvent[]): Map<number, QueuedEvent[]> {
  const rows = new Map<number, QueuedEvent[]>();
  for (const event of events) {
    let row = rows.get(event.queueId);
    if (!row) {
      row = [];
      rows.set(event.queueId, row);
    }
    row.push(event);
  }
  return rows;
}
