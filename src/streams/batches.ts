import { gzipSync } from 'node:zlib';
import { type BatchLimits, type EncodedBatch, type Item, itemBytes, writeItem } from './destinations/destination.ts';
import type { ItemEncoder } from './destinations/itemEncoders.ts';
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
 * A chunk's records as batches within the destination's limits, one at a time, each ready to send: its body
 * framed and gzipped. Each batch is led by the tree head record when there is one, and each item is written
 * into the batch's body as soon as its record comes: a record whose JSON is written from a row's bytes is
 * valid only until the next one is taken (streams/records.ts), and one that did not fit a batch is held, its
 * row unmoved, for the next. Together the batches cover every leaf of the chunk: the last one takes the
 * filtered-out leaves after its last record. No batch when no record got through the filter.
 */
export class BatchCutter {
  private readonly encoder: ItemEncoder;
  private readonly limits: BatchLimits;
  private readonly span: ChunkSpan;
  private readonly records: Iterator<StreamRecord>;
  private readonly headItem: Item | undefined;
  private readonly body: BodyWriter;
  private readonly createdAtMs = Date.now();
  /** The first leaf of the next batch. */
  private firstLeaf: number;
  /** A record's item that did not fit the batch before, and its leaf. */
  private held: { readonly item: Item; readonly length: number; readonly leaf: number } | undefined;
  private exhausted = false;

  constructor(encoder: ItemEncoder, limits: BatchLimits, span: ChunkSpan, records: Iterable<StreamRecord>, head: StreamRecord | undefined) {
    this.encoder = encoder;
    this.limits = limits;
    this.span = span;
    this.records = records[Symbol.iterator]();
    this.headItem = head && encoder.encode(head);
    this.body = new BodyWriter(encoder, limits.maxBytes);
    this.firstLeaf = span.firstLeaf;
  }

  /** The next batch; undefined once every record is in one. */
  next(): Batch | undefined {
    const { body, limits } = this;
    body.start();
    if (this.headItem) body.add(this.headItem, itemBytes(this.headItem));
    let events = 0;
    let lastLeaf = this.firstLeaf - 1;
    if (this.held) {
      body.add(this.held.item, this.held.length);
      lastLeaf = this.held.leaf;
      events = 1;
      this.held = undefined;
    }
    while (!this.exhausted) {
      const step = this.records.next();
      if (step.done) {
        this.exhausted = true;
        break;
      }
      const item = this.encoder.encode(step.value);
      const length = itemBytes(item);
      if (events > 0 && (body.items >= limits.maxItems || body.bytesWith(length) > limits.maxBytes)) {
        this.held = { item, length, leaf: step.value.leafIndex };
        break;
      }
      body.add(item, length);
      lastLeaf = step.value.leafIndex;
      events += 1;
    }
    if (events === 0) return undefined;
    const { streamId, tenantId } = this.span;
    const last = this.exhausted ? this.span.lastLeaf : lastLeaf;
    const encoded = { streamId, tenantId, firstLeaf: this.firstLeaf, lastLeaf: last, body: body.finish(), createdAtMs: this.createdAtMs };
    this.firstLeaf = lastLeaf + 1;
    return { encoded, events };
  }
}

/** Every batch of a chunk at once (BatchCutter's). */
export function cutBatches(
  encoder: ItemEncoder,
  limits: BatchLimits,
  span: ChunkSpan,
  records: Iterable<StreamRecord>,
  head: StreamRecord | undefined,
): Batch[] {
  const cutter = new BatchCutter(encoder, limits, span, records, head);
  const batches: Batch[] = [];
  for (let batch = cutter.next(); batch; batch = cutter.next()) batches.push(batch);
  return batches;
}

/** One record alone in a batch (a test send). */
export function singleBatch(encoder: ItemEncoder, span: ChunkSpan, record: StreamRecord): EncodedBatch {
  const item = encoder.encode(record);
  const body = new BodyWriter(encoder, 0);
  body.start();
  body.add(item, itemBytes(item));
  return { ...span, body: body.finish(), createdAtMs: Date.now() };
}

/**
 * A batch's body as it grows, in a scratch buffer reused from batch to batch; finish() gzips it. The sizes are
 * the destination's framing's, exactly: what limits.maxBytes bounds (before compression).
 */
class BodyWriter {
  private readonly framing: ItemEncoder['framing'];
  private readonly separatorBytes: number;
  private readonly closeBytes: number;
  private scratch: Buffer;
  private length = 0;
  items = 0;

  constructor(encoder: ItemEncoder, expectedBytes: number) {
    this.framing = encoder.framing;
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
    return gzipSync(this.scratch.subarray(0, this.length));
  }

  private reserve(bytes: number): void {
    if (bytes <= this.scratch.length) return;
    const larger = Buffer.allocUnsafe(Math.max(bytes, this.scratch.length * 2));
    this.scratch.copy(larger, 0, 0, this.length);
    this.scratch = larger;
  }
}
