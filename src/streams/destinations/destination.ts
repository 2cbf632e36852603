import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import type { StreamRecord } from '../records.ts';

/**
 * A stream's destination: how a record becomes one item of its protocol, how many items and bytes one
 * request may hold (the destination's documented limits), and how a batch is sent. The runner fills
 * batches up to the limits, in trail order, and sends one at a time per tenant (streams/streamRunner.ts).
 */
export interface Destination {
  readonly limits: BatchLimits;
  /** How the items of a batch make its body. */
  readonly framing: BodyFraming;
  /** The protocol's item for one record; its length in the body (itemBytes) counts towards limits.maxBytes. */
  encode(record: StreamRecord): Item;
  /**
   * Starts compressing the batch's body (compressedBody) without sending it: the worker calls it for the next
   * batch while the one before is in flight, so that compression and the destination's answer overlap.
   */
  prepare(batch: EncodedBatch): void;
  send(batch: EncodedBatch): Promise<SendOutcome>;
  close(): Promise<void>;
}

export interface BatchLimits {
  readonly maxItems: number;
  /** Bytes of the items before compression, framing included. */
  readonly maxBytes: number;
}

/** A body: `open`, the items with `separator` between them, `close` (a JSON array, lines of NDJSON…). */
export interface BodyFraming {
  readonly open: string;
  readonly separator: string;
  readonly close: string;
}

/**
 * JSON written straight into a body when the batch is put together, whose length is known before: a native
 * record read as bytes (streams/records.ts), which goes from the bytes Postgres sent into the request body
 * in one copy, without a string or a Buffer of its own.
 */
export interface JsonWriter {
  readonly byteLength: number;
  /** Writes the bytes at `at`; returns where they end. */
  writeTo(target: Buffer, at: number): number;
}

/**
 * One item of a destination's protocol as the parts it is written from, in order: text, written as UTF-8,
 * and a record's JSON as it comes (text, or a JsonWriter), between the destination's own text before and after.
 */
export type Item = readonly (string | JsonWriter)[];

/** The item's length in the body. */
export function itemBytes(item: Item): number {
  let length = 0;
  for (const part of item) length += typeof part === 'string' ? Buffer.byteLength(part) : part.byteLength;
  return length;
}

/** Writes the item into `target` at `at`, which has room for it; returns where it ends. */
export function writeItem(item: Item, target: Buffer, at: number): number {
  let written = at;
  for (const part of item) written = typeof part === 'string' ? written + target.write(part, written) : part.writeTo(target, written);
  return written;
}

export interface EncodedBatch {
  readonly streamId: string;
  readonly tenantId: string;
  /** The leaves the batch covers, filtered-out events included: [firstLeaf, lastLeaf]. */
  readonly firstLeaf: number;
  readonly lastLeaf: number;
  /** Its items framed as the destination's protocol frames them, before compression. */
  readonly body: Buffer;
  /** When the batch was first put together: its S3 object is dated by it, whatever the retries. */
  readonly createdAtMs: number;
}

/**
 * What became of a batch:
 * - `delivered`: acknowledged; the stream's position moves past it;
 * - `retry`: a failure that heals by itself (429, 5xx, 408, a timeout, a refused connection): the same batch
 *   again after a backoff, forever, with `retryAfterMs` when the destination said when;
 * - `too_large`: the destination refused the request's size (413): the batch is split and sent again;
 * - `refused`: an answer that will not change by retrying (401, 403, 404, another 4xx): the stream is failing
 *   until someone fixes the destination, and probes it now and then meanwhile.
 */
export type SendOutcome =
  | { readonly kind: 'delivered' }
  | { readonly kind: 'retry'; readonly reason: string; readonly retryAfterMs?: number }
  | { readonly kind: 'too_large'; readonly reason: string }
  | { readonly kind: 'refused'; readonly reason: string };

/** The outcome an HTTP status means, for the destinations that speak HTTP; `reason` says what the destination said. */
export function outcomeOfStatus(status: number, reason: string, retryAfterMs?: number): SendOutcome {
  if (status >= 200 && status < 300) return { kind: 'delivered' };
  if (status === 413) return { kind: 'too_large', reason };
  if (status === 408 || status === 429 || status >= 500)
    return { kind: 'retry', reason, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) };
  return { kind: 'refused', reason };
}

/** Seconds of a Retry-After header (delta-seconds or an HTTP date) as milliseconds; undefined when absent or unreadable. */
export function retryAfterMs(header: string | undefined, nowMs = Date.now()): number | undefined {
  if (header === undefined || header === '') return undefined;
  if (/^\d+$/.test(header)) return Number(header) * 1000;
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

const gzipAsync = promisify(gzip);

/**
 * How much compressed output the thread pool fills before handing it to the event loop. A 1 MB body of
 * records compresses to about 65 KB: at zlib's default of 16 KB that took five trips through the event loop,
 * each waiting for whatever held it (cutting the next batch, a few milliseconds), and a stream waited for its
 * next body for a third of each batch's time; in one trip the stream went from 0.56 to 0.60 of the bare
 * sender (BENCHMARKS.md, "Log streams' throughput: binary COPY").
 */
const GZIP_OUTPUT_CHUNK_BYTES = 128 * 1024;

/**
 * A batch's body, gzipped on libuv's thread pool: the stream's event loop goes on meanwhile (reading the
 * next chunk of the trail), where gzipSync held it for the whole compression of up to 5 MB.
 */
function gzipped(body: Buffer): Promise<Buffer> {
  return gzipAsync(body, { chunkSize: GZIP_OUTPUT_CHUNK_BYTES });
}

const compressed = new WeakMap<EncodedBatch, Promise<Buffer>>();

/**
 * A batch's body gzipped once: prepare() starts it ahead, send() awaits the same promise. Kept only as long as
 * the batch itself (a batch cut again after a 413 is a new one).
 */
export function compressedBody(batch: EncodedBatch): Promise<Buffer> {
  let body = compressed.get(batch);
  if (body === undefined) {
    body = gzipped(batch.body);
    // Awaited by send; a prepared body whose batch is never sent (the one before failed) must not be an
    // unhandled rejection.
    body.catch(() => undefined);
    compressed.set(batch, body);
  }
  return body;
}
