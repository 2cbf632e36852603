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
  /** The protocol's item for one record; its UTF-8 length counts towards limits.maxBytes. */
  encode(record: StreamRecord): string;
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

export interface EncodedBatch {
  readonly streamId: string;
  readonly tenantId: string;
  /** The leaves the batch covers, filtered-out events included: [firstLeaf, lastLeaf]. */
  readonly firstLeaf: number;
  readonly lastLeaf: number;
  readonly items: readonly string[];
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
 * A batch's body, gzipped on libuv's thread pool: the stream's event loop goes on meanwhile (reading the
 * next chunk of the trail), where gzipSync held it for the whole compression of up to 5 MB.
 */
function gzipped(body: Buffer): Promise<Buffer> {
  return gzipAsync(body);
}

/**
 * Items joined by `separator` between `prefix` and `suffix`, as UTF-8 written once into a Buffer of the
 * exact size. Joining them into a string and encoding that string copied every batch twice more: a third
 * of the CPU a native stream spent between the documents' rows and gzip (BENCHMARKS.md, "Log streams").
 */
export function joinedBytes(items: readonly string[], separator: string, prefix = '', suffix = ''): Buffer {
  let length = Buffer.byteLength(prefix) + Buffer.byteLength(suffix) + Math.max(0, items.length - 1) * Buffer.byteLength(separator);
  for (const item of items) length += Buffer.byteLength(item);
  const body = Buffer.allocUnsafe(length);
  let offset = body.write(prefix, 0);
  for (let index = 0; index < items.length; index += 1) {
    if (index > 0) offset += body.write(separator, offset);
    offset += body.write(items[index]!, offset);
  }
  body.write(suffix, offset);
  return body;
}

const compressed = new WeakMap<EncodedBatch, Promise<Buffer>>();

/**
 * A batch's body, `bytes()` gzipped once: prepare() starts it ahead, send() awaits the same promise. Kept
 * only as long as the batch itself (a batch cut again after a 413 is a new one).
 */
export function compressedBody(batch: EncodedBatch, bytes: () => Buffer): Promise<Buffer> {
  let body = compressed.get(batch);
  if (body === undefined) {
    body = gzipped(bytes());
    // Awaited by send; a prepared body whose batch is never sent (the one before failed) must not be an
    // unhandled rejection.
    body.catch(() => undefined);
    compressed.set(batch, body);
  }
  return body;
}
