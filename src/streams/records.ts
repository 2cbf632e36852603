import type { SignedTreeHead } from '../client/integrity.ts';
import { toOcsf, type ServedEvent } from './ocsf.ts';
import type { StreamFormat } from './streamRules.ts';

/**
 * What a stream sends, before a destination wraps it in its protocol: one record per event, and a tree-head
 * record at the start of a batch when the stream carries heads (docs/streams.md "Records").
 *
 * - `native`: the event document exactly as the API serves it, with one member appended, `leaf_index`, its
 *   position in the tenant's trail (the way an export with proofs appends `proof`). With `event_id` it is
 *   what a consumer deduplicates on.
 * - `ocsf`: the OCSF event of ocsf.ts, the served document in its `raw_data`.
 * - a tree head: `{"tree_head": <the tenant's latest signed tree head>}`.
 */

export interface StreamRecord {
  readonly kind: 'event' | 'tree_head' | 'test';
  readonly tenantId: string;
  /** The event's leaf index; for a tree head, the first leaf of the batch it opens. */
  readonly leafIndex: number;
  readonly eventId: string | undefined;
  readonly timestampMs: number;
  readonly action: string | undefined;
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

/** The id, time and action of a version-1 document read at their offsets; undefined for any other shape. */
function documentHead(document: string): { eventId: string; timestamp: string; action: string } | undefined {
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
  return { eventId: document.slice(EVENT_ID_AT, EVENT_ID_AT + 36), timestamp: document.slice(TIMESTAMP_AT, TIMESTAMP_AT + 24), action };
}

/** The record of one event of `tenantId`; `document` is its served JSON text. */
export function eventRecord(format: StreamFormat, tenantId: string, document: string, leafIndex: number): StreamRecord {
  if (format === 'ocsf') {
    const event = JSON.parse(document) as ServedEvent;
    return {
      kind: 'event',
      tenantId,
      leafIndex,
      eventId: event.event_id,
      timestampMs: Date.parse(event.timestamp),
      action: event.action,
      json: JSON.stringify(toOcsf(event, document, leafIndex)),
    };
  }
  // The native record needs only the id, time and action besides the text: read from the fixed start of the
  // document rather than parsing it whole (a stream renders tens of thousands a second).
  const fields =
    documentHead(document) ??
    (({ event_id, timestamp, action }) => ({ eventId: event_id, timestamp, action }))(JSON.parse(document) as ServedEvent);
  return {
    kind: 'event',
    tenantId,
    leafIndex,
    eventId: fields.eventId,
    timestampMs: Date.parse(fields.timestamp),
    action: fields.action,
    json: `${document.slice(0, -1)},"leaf_index":${leafIndex}}`,
  };
}

export function treeHeadRecord(head: SignedTreeHead, firstLeaf: number): StreamRecord {
  return {
    kind: 'tree_head',
    tenantId: head.tenant_id,
    leafIndex: firstLeaf,
    eventId: undefined,
    timestampMs: Date.parse(head.timestamp),
    action: undefined,
    json: JSON.stringify({ tree_head: head }),
  };
}

/** The one record a test send carries (POST /audit/streams/{id}/test): nothing of the trail. */
export function testRecord(streamId: string, tenantId: string, nowMs = Date.now()): StreamRecord {
  return {
    kind: 'test',
    tenantId,
    leafIndex: 0,
    eventId: undefined,
    timestampMs: nowMs,
    action: 'stream.test',
    json: JSON.stringify({ stream_test: { stream_id: streamId, tenant_id: tenantId, sent_at: new Date(nowMs).toISOString() } }),
  };
}
