import type { SignedTreeHead } from '../client/integrity.ts';
import type { BinaryRows } from '../db/binaryCopy.ts';
import { compactDocumentLength, compactTimestampMs, writeCompactDocument } from '../events/compactDocumentBytes.ts';
import { documentOfLeafRow, LEAF_ROW_PARTS } from '../events/leafChunks.ts';
import type { JsonWriter } from './destinations/destination.ts';
import { DEFAULT_OCSF_VERSION, type OcsfVersion, ocsfTestRecord, toOcsf, type ServedEvent } from './ocsf.ts';
import type { StreamFormat } from './streamRules.ts';
import { systemClock } from '../platform/clock.ts';

/**
 * What a stream sends, before a destination wraps it in its protocol: one record per event, and a tree-head
 * record at the start of a batch when the stream carries heads (docs/streams.md "Records").
 *
 * - `native`: the event document exactly as the API serves it, with one member appended, `leaf_index`, its
 *   position in the tenant's trail (the way an export with proofs appends `proof`). With `event_id` it is
 *   what a consumer deduplicates on.
 * - `ocsf`: the OCSF event of ocsf.ts, of the stream's OCSF release, the served document in its `raw_data`.
 * - a tree head: `{"tree_head": <the tenant's latest signed tree head>}`, first in a batch or beside it
 *   (ItemEncoder.headsBeside).
 */

export type StreamRecord = EventRecord | NoticeRecord;

interface RecordOfTenant {
  readonly tenantId: string;
  /** The event's leaf index; for a tree head, the first leaf of the batch it opens. */
  readonly leafIndex: number;
  readonly timestampMs: number;
  readonly action: string | undefined;
}

export interface EventRecord extends RecordOfTenant {
  readonly kind: 'event';
  /**
   * The record as JSON: its text, or for a native record of a compact row, what writes it from the row's bytes
   * (recordsOfLeafRows), valid until the next record of those rows is taken.
   */
  readonly json: string | JsonWriter;
}

/** A record that is not an event: a tree head, or a test send's. */
export interface NoticeRecord extends RecordOfTenant {
  readonly kind: 'tree_head' | 'test';
  /** The record as JSON text. */
  readonly json: string;
}

/**
 * The served documents of version 1 begin with these members, in this order (events/eventDocument.ts):
 * `{"event_id":"<36>","timestamp":"<24>","action":"…"`, so the three are read at fixed offsets. A regular
 * expression did the same at twice the CPU, and a stream reads tens of thousands a second.
 */
const EVENT_ID_AT = '{"event_id":"'.length;
const TIMESTAMP_AT = EVENT_ID_AT + 36 + '","timestamp":"'.length;
const ACTION_AT = TIMESTAMP_AT + 24 + '","action":"'.length;

/** The time and action of a version-1 document read at their offsets; undefined for any other shape. */
function documentHead(document: string): { timestamp: string; action: string } | undefined {
  if (
    !document.startsWith('{"event_id":"') ||
    !document.startsWith('","timestamp":"', EVENT_ID_AT + 36) ||
    !document.startsWith('","action":"', TIMESTAMP_AT + 24)
  )
    return undefined;
  const actionEnd = document.indexOf('"', ACTION_AT);
  const action = document.slice(ACTION_AT, actionEnd);
  // An escaped quote would end the action early: such a document is read whole.
  if (actionEnd < 0 || action.includes('\\')) return undefined;
  return { timestamp: document.slice(TIMESTAMP_AT, TIMESTAMP_AT + 24), action };
}

/** The record of one event of `tenantId`; `document` is its served JSON text. */
export function eventRecord(
  format: StreamFormat,
  tenantId: string,
  document: string,
  leafIndex: number,
  ocsfVersion: OcsfVersion = DEFAULT_OCSF_VERSION,
): EventRecord & { readonly json: string } {
  if (format === 'ocsf') {
    const event = JSON.parse(document) as ServedEvent;
    return {
      kind: 'event',
      tenantId,
      leafIndex,
      timestampMs: Date.parse(event.timestamp),
      action: event.action,
      json: JSON.stringify(toOcsf(event, document, leafIndex, ocsfVersion)),
    };
  }
  // The native record needs only the time and action besides the text: read from the fixed start of the
  // document rather than parsing it whole (a stream renders tens of thousands a second).
  const fields = documentHead(document) ?? (({ timestamp, action }) => ({ timestamp, action }))(JSON.parse(document) as ServedEvent);
  return {
    kind: 'event',
    tenantId,
    leafIndex,
    timestampMs: Date.parse(fields.timestamp),
    action: fields.action,
    json: `${document.slice(0, -1)},"leaf_index":${leafIndex}}`,
  };
}

/**
 * The records of the rows of copyLeafDocuments (events/leafChunks.ts) of `tenantId`, in leaf order, one at a
 * time: the JSON of a native record of a compact row, nearly every row, is a JsonWriter that writes it from
 * the row's bytes straight into a batch's body (a stream passes tens of megabytes a second, and decoding them
 * into strings to encode them back was most of its CPU); it is valid only until the next record is taken.
 * Any other row or format goes through the document's text.
 */
export function* recordsOfLeafRows(
  format: StreamFormat,
  ocsfVersion: OcsfVersion,
  tenantId: string,
  rows: BinaryRows,
): Generator<EventRecord> {
  for (const index of leafOrder(rows)) {
    rows.select(index);
    const leafIndex = rows.integer(0);
    const documentLength = format === 'native' ? compactDocumentLength(rows, LEAF_ROW_PARTS) : undefined;
    if (documentLength === undefined) {
      yield eventRecord(format, tenantId, documentOfLeafRow(rows), leafIndex, ocsfVersion);
      continue;
    }
    yield {
      kind: 'event',
      tenantId,
      leafIndex,
      timestampMs: compactTimestampMs(rows, LEAF_ROW_PARTS),
      action: rows.text(LEAF_ROW_PARTS + 3)!,
      json: new CompactRecordJson(rows, documentLength, leafIndex),
    };
  }
}

/**
 * The rows' indexes in leaf order. Either plan of the statement yields that order and Postgres is not asked to
 * sort (copyLeafDocuments says why): a plan that did otherwise is put right here.
 */
function leafOrder(rows: BinaryRows): Int32Array {
  const order = new Int32Array(rows.rowCount);
  const leaves = new Float64Array(rows.rowCount);
  let ordered = true;
  for (let index = 0; index < rows.rowCount; index += 1) {
    rows.select(index);
    order[index] = index;
    leaves[index] = rows.integer(0);
    if (index > 0 && leaves[index]! < leaves[index - 1]!) ordered = false;
  }
  return ordered ? order : order.sort((a, b) => leaves[a]! - leaves[b]!);
}

/** A native record's JSON, the compact row's document with `leaf_index` appended, written from the row. */
class CompactRecordJson implements JsonWriter {
  readonly byteLength: number;
  private readonly rows: BinaryRows;
  private readonly member: string;

  constructor(rows: BinaryRows, documentLength: number, leafIndex: number) {
    this.rows = rows;
    this.member = `,"leaf_index":${leafIndex}}`;
    this.byteLength = documentLength + this.member.length;
  }

  writeTo(target: Buffer, at: number): number {
    const end = writeCompactDocument(this.rows, LEAF_ROW_PARTS, target, at);
    return end + target.write(this.member, end, 'latin1');
  }
}

export function treeHeadRecord(head: SignedTreeHead, firstLeaf: number): NoticeRecord {
  return {
    kind: 'tree_head',
    tenantId: head.tenant_id,
    leafIndex: firstLeaf,
    timestampMs: Date.parse(head.timestamp),
    action: undefined,
    json: JSON.stringify({ tree_head: head }),
  };
}

/**
 * The one record a test send carries (POST /audit/streams/{id}/test): nothing of the trail. An `ocsf` stream's is
 * an OCSF event (ocsfTestRecord), so that its consumer meets nothing else even then.
 */
export function testRecord(
  streamId: string,
  tenantId: string,
  format: { readonly format: StreamFormat; readonly ocsfVersion: OcsfVersion | null },
  nowMs = systemClock.now(),
): NoticeRecord {
  const json =
    format.format === 'ocsf'
      ? ocsfTestRecord(streamId, tenantId, nowMs, format.ocsfVersion ?? DEFAULT_OCSF_VERSION)
      : { stream_test: { stream_id: streamId, tenant_id: tenantId, sent_at: new Date(nowMs).toISOString() } };
  return { kind: 'test', tenantId, leafIndex: 0, timestampMs: nowMs, action: 'stream.test', json: JSON.stringify(json) };
}
