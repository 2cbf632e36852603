import type { BatchLimits, Destination, EncodedBatch } from './destinations/destination.ts';
import type { StreamRecord } from './records.ts';

/** A batch ready to send, and how many events (not counting a tree head) it carries. */
export interface Batch {
  readonly encoded: EncodedBatch;
  readonly events: number;
}

/** Where a chunk of a tenant's trail sits: the leaves [firstLeaf, lastLeaf], filtered-out ones included. */
export interface ChunkSpan {
  readonly streamId: string;
  readonly tenantId: string;
  readonly firstLeaf: number;
  readonly lastLeaf: number;
}

/**
 * A chunk's records as batches within the destination's limits, each led by the tree head record when
 * there is one. Together the batches cover every leaf of the chunk: the last one takes the filtered-out
 * leaves after its last record. No batch when no record got through the filter.
 */
export function cutBatches(
  destination: Destination,
  limits: BatchLimits,
  span: ChunkSpan,
  records: readonly StreamRecord[],
  head: StreamRecord | undefined,
): Batch[] {
  const { streamId, tenantId } = span;
  const headItem = head && destination.encode(head);
  const headBytes = headItem === undefined ? 0 : Buffer.byteLength(headItem) + 1;
  const batches: Batch[] = [];
  let items: string[] = headItem === undefined ? [] : [headItem];
  let bytes = headBytes;
  let firstLeaf = span.firstLeaf;
  let events = 0;
  const createdAtMs = Date.now();
  for (let index = 0; index < records.length; index += 1) {
    const item = destination.encode(records[index]!);
    const itemBytes = Buffer.byteLength(item) + 1;
    if (events > 0 && (items.length >= limits.maxItems || bytes + itemBytes > limits.maxBytes)) {
      const lastLeaf = records[index - 1]!.leafIndex;
      batches.push({ encoded: { streamId, tenantId, firstLeaf, lastLeaf, items, createdAtMs }, events });
      firstLeaf = lastLeaf + 1;
      items = headItem === undefined ? [] : [headItem];
      bytes = headBytes;
      events = 0;
    }
    items.push(item);
    bytes += itemBytes;
    events += 1;
  }
  if (events > 0) batches.push({ encoded: { streamId, tenantId, firstLeaf, lastLeaf: span.lastLeaf, items, createdAtMs }, events });
  return batches;
}
