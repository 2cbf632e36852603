import { gzipSync } from 'node:zlib';
import { type BatchLimits, type EncodedBatch, type Item, itemBytes, writeItem } from './destinations/destination.ts';
import type { ItemEncoder } from './destinations/itemEncoders.ts';
import type { NoticeRecord, StreamRecord } from './records.ts';
import { systemClock } from '../platform/clock.ts';

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
 * A chunk's records as batches within the destination's limits, each ready to send: its body framed and
 * gzipped. Each batch is led by the tree head record when there is one (or carries it beside its body, for a
 * destination whose heads travel beside: ItemEncoder.headsBeside), and each item is written into the
 * batch's body as soon as its record comes, before the next record is taken: a record whose JSON is written
 * from a row's bytes is valid only until then (streams/records.ts). Together the batches cover every leaf of
 * the chunk: the last one takes the filtered-out leaves after its last record. No batch when no record got
 * through the filter.
 */
export function cutBatches(
  encoder: ItemEncoder,
  limits: BatchLimits,
  span: ChunkSpan,
  records: Iterable<StreamRecord>,
  head: NoticeRecord | undefined,
): Batch[] {
  const { streamId, tenantId } = span;
  const headItem = head && !encoder.headsBeside ? encoder.encode(head) : undefined;
  const beside = head && encoder.headsBeside ? { treeHead: head.json } : {};
  const body = new BodyWriter(encoder, limits.maxBytes);
  const batches: Batch[] = [];
  const createdAtMs = systemClock.now();
  let firstLeaf = span.firstLeaf;
  let lastLeaf = firstLeaf - 1;
  let events = 0;
  const startBatch = () => {
    body.start();
    if (headItem) body.add(headItem, itemBytes(headItem));
  };
  startBatch();
  for (const record of records) {
    const item = encoder.encode(record);
    const length = itemBytes(item);
    if (events > 0 && (body.items >= limits.maxItems || body.bytesWith(length) > limits.maxBytes)) {
      batches.push({ encoded: { streamId, tenantId, firstLeaf, lastLeaf, body: body.finish(), createdAtMs, ...beside }, events });
      firstLeaf = lastLeaf + 1;
      events = 0;
      startBatch();
    }
    body.add(item, length);
    lastLeaf = record.leafIndex;
    events += 1;
  }
  if (events > 0)
    batches.push({
      encoded: { streamId, tenantId, firstLeaf, lastLeaf: span.lastLeaf, body: body.finish(), createdAtMs, ...beside },
      events,
    });
  return batches;
}

/** One record alone in a batch (a test send). */
export function singleBatch(encoder: ItemEncoder, span: ChunkSpan, record: StreamRecord): EncodedBatch {
  return cutBatches(encoder, encoder.limits, span, [record], undefined)[0]!.encoded;
}

/**
 * A batch's body as it grows, in a scratch buffer reused from batch to batch; finish() gzips it (unless the
 * destination sends it unpacked). The sizes are
 * the destination's framing's, exactly: what limits.maxBytes bounds (before compression).
 */
class BodyWriter {
  private readonly framing: ItemEncoder['framing'];
  private readonly gzip: boolean;
  private readonly separatorBytes: number;
  private readonly closeBytes: number;
  private scratch: Buffer;
  private length = 0;
  items = 0;

  constructor(encoder: ItemEncoder, expectedBytes: number) {
    this.framing = encoder.framing;
    this.gzip = encoder.gzip;
    this.separatorBytes = Buffer.byteLength(this.framing.separator);
    this.closeBytes = Buffer.byteLength(this.framing.close);
    this.scratch = Buffer.allocUnsafe(Math.min(Math.max(expectedBytes, 4096), 8_000_000));
  }

  start(): void {
    this.items = 0;
    this.length = this.scratch.write(this.framing.open, 0);
  }

  /** The body's length, closed, with one more item of `itemLength` bytes. */
  bytesWith(itemLength: number): number {
    return this.length + (this.items > 0 ? this.separatorBytes : 0) + itemLength + this.closeBytes;
  }

  add(item: Item, itemLength: number): void {
    this.reserve(this.bytesWith(itemLength));
    if (this.items > 0) this.length += this.scratch.write(this.framing.separator, this.length);
    const end = writeItem(item, this.scratch, this.length);
    if (end !== this.length + itemLength) throw new Error(`an item wrote ${end - this.length} bytes, not the ${itemLength} it counted`);
    this.length = end;
    this.items += 1;
  }

  finish(): Buffer {
    this.reserve(this.length + this.closeBytes);
    this.length += this.scratch.write(this.framing.close, this.length);
    const body = this.scratch.subarray(0, this.length);
    // Copied when not compressed: the scratch buffer is the next batch's.
    return this.gzip ? gzipSync(body) : Buffer.from(body);
  }

  private reserve(bytes: number): void {
    if (bytes <= this.scratch.length) return;
    const larger = Buffer.allocUnsafe(Math.max(bytes, this.scratch.length * 2));
    this.scratch.copy(larger, 0, 0, this.length);
    this.scratch = larger;
  }
}
