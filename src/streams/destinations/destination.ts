import { systemClock } from '../../platform/clock.ts';

/**
 * A stream's destination: how a batch is sent. How records become the items of its protocol, and how many
 * items and bytes one request may hold, is its ItemEncoder's (itemEncoders.ts), which needs only the
 * destination's settings: batches are put together on another thread (streams/chunkPreparer.ts) and sent
 * here, one at a time (streams/streamWorker.ts).
 */
export interface Destination {
  /** `signal` aborts what only waits (an acknowledgement's polling): the stream is stopping. */
  send(batch: EncodedBatch, signal?: AbortSignal): Promise<SendOutcome>;
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
  /** The request body: its items framed as the destination's protocol frames them, gzipped unless ItemEncoder.gzip is off (streams/batches.ts). */
  readonly body: Buffer;
  /** When the batch was first put together: its S3 object is dated by it, whatever the retries. */
  readonly createdAtMs: number;
  /**
   * The tenant's signed tree head record (`{"tree_head": …}`) when it travels beside the records rather than
   * among them (ItemEncoder.headsBeside): the destination sends it its own way (a header, an object).
   */
  readonly treeHead?: string;
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
export function retryAfterMs(header: string | undefined, nowMs = systemClock.now()): number | undefined {
  if (header === undefined || header === '') return undefined;
  if (/^\d+$/.test(header)) return Number(header) * 1000;
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}
