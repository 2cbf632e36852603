import type { StreamRecord } from '../records.ts';
import type { DestinationInput, StreamFormat } from '../streamRules.ts';
import type { BatchLimits, BodyFraming, Item } from './destination.ts';

/**
 * How a destination's protocol writes records: one item per record, the items of a batch framed into its body,
 * and how many items and bytes one request may hold (the destination's documented limits). Apart from sending,
 * with nothing but the destination's settings, so that batches are put together away from the sending thread
 * (streams/chunkPreparer.ts).
 */
export interface ItemEncoder {
  readonly limits: BatchLimits;
  readonly framing: BodyFraming;
  /**
   * Whether a batch's tree head travels beside its records (EncodedBatch.treeHead: a header, an object of its
   * own) rather than first among them: for OCSF records in a body of records only, where a strict OCSF
   * consumer must never meet anything else. HEC and Datadog keep heads apart in their own envelope.
   */
  readonly headsBeside: boolean;
  /** Whether the body is gzipped: every HTTP destination's is; an AMQP batch is split into messages instead. */
  readonly gzip: boolean;
  /** The protocol's item for one record; its length in the body (itemBytes) counts towards limits.maxBytes. */
  encode(record: StreamRecord): Item;
}

/** The item encoder of a destination as created. */
export function itemEncoderOf(destination: DestinationInput, format: StreamFormat): ItemEncoder {
  switch (destination.type) {
    case 'splunk_hec':
      return new HecItems(destination, format);
    case 'datadog':
      return new DatadogItems(destination, format);
    case 'https':
      return destination.body === 'json'
        ? new JsonArrayItems({ maxItems: 5000, maxBytes: 5_000_000 }, format === 'ocsf')
        : new NdjsonItems({ maxItems: 5000, maxBytes: 5_000_000 }, format === 'ocsf');
    case 's3':
      return new NdjsonItems({ maxItems: 10_000, maxBytes: 8_000_000 }, format === 'ocsf');
    case 'amqp':
      // One message a record, confirmed together: a batch bounds what one confirmation waits for.
      return new NdjsonItems({ maxItems: 2000, maxBytes: 4_000_000 }, format === 'ocsf', false);
  }
}

/**
 * Splunk HEC's JSON events (`{"time", "host", "source", "sourcetype", "index"?, "event"}`), one a line, at most
 * 1 MB a request before compression: Splunk Cloud's maximum content length (Splunk Enterprise allows more).
 */
export class HecItems implements ItemEncoder {
  readonly limits: BatchLimits = { maxItems: 10_000, maxBytes: 1_000_000 };
  readonly headsBeside = false;
  readonly gzip = true;
  readonly framing: BodyFraming = { open: '', separator: '\n', close: '' };
  /** The members every record shares, after `time`, as JSON text: `,"host":…,"source":…(,"index":…)`. */
  private readonly sharedMembers: string;
  /** The shared members and the event records' sourcetype: written once, not per record. */
  private readonly eventMembers: string;

  constructor(settings: { readonly source?: string; readonly index?: string; readonly sourcetype?: string }, format: StreamFormat) {
    this.sharedMembers = `,"host":"audit-trail","source":${JSON.stringify(settings.source ?? 'audit-trail')}${
      settings.index === undefined ? '' : `,"index":${JSON.stringify(settings.index)}`
    }`;
    this.eventMembers = `${this.sharedMembers},"sourcetype":${JSON.stringify(settings.sourcetype ?? `audit-trail:${format}`)}`;
  }

  encode(record: StreamRecord): Item {
    // HEC's time is epoch seconds, with the milliseconds as a fraction.
    const time = (record.timestampMs / 1000).toFixed(3);
    const members = record.kind === 'event' ? this.eventMembers : `${this.sharedMembers},"sourcetype":"audit-trail:${record.kind}"`;
    return [`{"time":${time}${members},"event":`, record.json, '}'];
  }
}

/**
 * Datadog's log entries, a JSON array of at most 1,000 and 5 MB a request: the reserved attributes
 * (`ddsource`, `service`, `ddtags`, `message`) and the record as one attribute, `audit` (native) or `ocsf`.
 * Nested, not at the top: Datadog takes a top-level `timestamp` as the log's date and drops logs dated more than
 * 18 hours back, which every event of a backfill is; the log is dated on arrival and the event keeps its own
 * time inside.
 */
export class DatadogItems implements ItemEncoder {
  readonly limits: BatchLimits = { maxItems: 1000, maxBytes: 5_000_000 };
  readonly framing: BodyFraming = { open: '[', separator: ',', close: ']' };
  readonly headsBeside = false;
  readonly gzip = true;
  private readonly tags: readonly string[];
  private readonly attribute: string;
  private readonly sharedMembers: string;

  constructor(settings: { readonly service?: string; readonly tags?: readonly string[] }, format: StreamFormat) {
    this.tags = settings.tags ?? [];
    this.attribute = format === 'ocsf' ? 'ocsf' : 'audit';
    this.sharedMembers = `"ddsource":"audit-trail","service":${JSON.stringify(settings.service ?? 'audit-trail')}`;
  }

  encode(record: StreamRecord): Item {
    const tags = [`tenant:${record.tenantId}`, ...this.tags].join(',');
    if (record.kind === 'test' && this.attribute === 'ocsf') {
      // An ocsf stream's test record is an OCSF event (ocsf.ts): nested as the events are.
      return [`{${this.sharedMembers},"ddtags":${JSON.stringify(`${tags},record:test`)},"message":"test","ocsf":`, record.json, '}'];
    }
    if (record.kind !== 'event') {
      // The record is {"tree_head": …} or {"stream_test": …}: its member joins the entry's.
      return [
        `{${this.sharedMembers},"ddtags":${JSON.stringify(`${tags},record:${record.kind}`)},"message":${JSON.stringify(record.kind.replace('_', ' '))},${record.json.slice(1)}`,
      ];
    }
    const message = `${record.action} (leaf ${record.leafIndex})`;
    return [
      `{${this.sharedMembers},"ddtags":${JSON.stringify(tags)},"message":${JSON.stringify(message)},"${this.attribute}":`,
      record.json,
      '}',
    ];
  }
}

/** NDJSON, one record a line (a plain HTTPS collector, S3 objects, an AMQP batch), within the destination's limits. */
class NdjsonItems implements ItemEncoder {
  readonly limits: BatchLimits;
  readonly framing: BodyFraming = { open: '', separator: '', close: '' };
  readonly headsBeside: boolean;
  readonly gzip: boolean;

  constructor(limits: BatchLimits, headsBeside: boolean, gzip = true) {
    this.limits = limits;
    this.headsBeside = headsBeside;
    this.gzip = gzip;
  }

  encode(record: StreamRecord): Item {
    // Each line with its line feed, so that the sizes add up to the body's.
    return [record.json, '\n'];
  }
}

/** One JSON array of the records (an https collector with `body: json`), within the destination's limits. */
class JsonArrayItems implements ItemEncoder {
  readonly limits: BatchLimits;
  readonly framing: BodyFraming = { open: '[', separator: ',', close: ']' };
  readonly headsBeside: boolean;
  readonly gzip = true;

  constructor(limits: BatchLimits, headsBeside: boolean) {
    this.limits = limits;
    this.headsBeside = headsBeside;
  }

  encode(record: StreamRecord): Item {
    return [record.json];
  }
}
