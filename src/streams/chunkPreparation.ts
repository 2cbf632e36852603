import { BinaryRows } from '../db/binaryCopy.ts';
import { type Batch, type ChunkSpan, cutBatches } from './batches.ts';
import type { BatchLimits } from './destinations/destination.ts';
import { itemEncoderOf } from './destinations/itemEncoders.ts';
import { type NoticeRecord, recordsOfLeafRows } from './records.ts';
import type { OcsfVersion } from './ocsf.ts';
import type { DestinationInput, StreamFormat } from './streamRules.ts';

/** A chunk of a tenant's trail as read, and what its batches need: what a preparation thread is given. */
export interface ChunkJob {
  /** The chunk's rows as copyLeafDocuments read them: the bytes of a binary COPY. */
  readonly rows: Uint8Array;
  readonly destination: DestinationInput;
  readonly format: StreamFormat;
  /** The OCSF release of an `ocsf` stream's records. */
  readonly ocsfVersion: OcsfVersion;
  readonly span: ChunkSpan;
  readonly limits: BatchLimits;
  /** The tenant's latest signed tree head, leading each batch, when the stream carries heads. */
  readonly head: NoticeRecord | undefined;
}

/** The chunk's batches, each ready to send (its body framed and gzipped); none when the filter let no event through. */
export function prepareChunk(job: ChunkJob): Batch[] {
  const rows = new BinaryRows(Buffer.from(job.rows.buffer, job.rows.byteOffset, job.rows.byteLength));
  const records = recordsOfLeafRows(job.format, job.ocsfVersion, job.span.tenantId, rows);
  return cutBatches(itemEncoderOf(job.destination, job.format), job.limits, job.span, records, rows.rowCount > 0 ? job.head : undefined);
}

/**
 * Bytes that own their whole ArrayBuffer, so that handing it to another thread detaches nothing else: a small
 * Buffer is a slice of Node's shared pool, which a transfer would take from every other Buffer in it.
 */
export function ownedBytes(bytes: Uint8Array): Uint8Array {
  if (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && bytes.buffer instanceof ArrayBuffer) return bytes;
  return new Uint8Array(bytes);
}
