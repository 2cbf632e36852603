import type { StreamRecord } from '../records.ts';
import type { StreamFormat } from '../streamRules.ts';
import {
  compressedBody,
  outcomeOfStatus,
  retryAfterMs,
  type BatchLimits,
  type BodyFraming,
  type Destination,
  type EncodedBatch,
  type Item,
  type SendOutcome,
} from './destination.ts';
import { type HttpAnswer, type HttpPoster, outcomeOfNetworkFailure } from './httpPoster.ts';
import { header } from './splunkHec.ts';

export interface DatadogSettings {
  readonly url: string;
  readonly api_key: string;
  readonly service?: string;
  readonly tags?: readonly string[];
}

/**
 * Datadog's logs intake, HTTP API v2 (`POST /api/v2/logs`): a JSON array of log entries, gzipped, with
 * `DD-API-KEY`; at most 1,000 entries and 5 MB before compression per request, as the intake documents.
 * Each entry has the reserved attributes (`ddsource`, `service`, `ddtags`, `message`) and the record as
 * one attribute: `audit` (native) or `ocsf`. Nested, not at the top: Datadog takes a top-level `timestamp`
 * as the log's date and drops logs dated more than 18 hours back, which every event of a backfill is; the
 * log is dated on arrival and the event keeps its own time inside.
 */
export class DatadogLogs implements Destination {
  readonly limits: BatchLimits = { maxItems: 1000, maxBytes: 5_000_000 };
  readonly framing: BodyFraming = { open: '[', separator: ',', close: ']' };
  private readonly settings: DatadogSettings;
  private readonly poster: HttpPoster;
  private readonly endpoint: URL;
  private readonly attribute: string;
  private readonly sharedMembers: string;

  constructor(settings: DatadogSettings, format: StreamFormat, poster: HttpPoster) {
    this.settings = settings;
    this.poster = poster;
    this.endpoint = new URL(`${settings.url.replace(/\/+$/, '')}/api/v2/logs`);
    this.attribute = format === 'ocsf' ? 'ocsf' : 'audit';
    this.sharedMembers = `"ddsource":"audit-trail","service":${JSON.stringify(settings.service ?? 'audit-trail')}`;
  }

  encode(record: StreamRecord): Item {
    const tags = [`tenant:${record.tenantId}`, ...(this.settings.tags ?? [])].join(',');
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

  prepare(batch: EncodedBatch): void {
    void this.body(batch);
  }

  private body(batch: EncodedBatch): Promise<Buffer> {
    return compressedBody(batch);
  }

  async send(batch: EncodedBatch): Promise<SendOutcome> {
    const body = await this.body(batch);
    let answer: HttpAnswer;
    try {
      answer = await this.poster.post(
        this.endpoint,
        {
          'dd-api-key': this.settings.api_key,
          'content-type': 'application/json',
          'content-encoding': 'gzip',
          'user-agent': 'audit-trail-streams',
        },
        body,
      );
    } catch (error) {
      return outcomeOfNetworkFailure(error);
    }
    return outcomeOfStatus(
      answer.status,
      `Datadog answered ${answer.status} ${datadogText(answer.body)}`,
      retryAfterMs(header(answer.headers['retry-after'])),
    );
  }

  close(): Promise<void> {
    return this.poster.close();
  }
}

/** The intake's `{"errors": [{"status", "title", "detail"}]}` as text; any other body as its start. */
function datadogText(body: string): string {
  try {
    const parsed = JSON.parse(body) as { errors?: Array<{ title?: string; detail?: string } | string> };
    if (Array.isArray(parsed.errors) && parsed.errors.length > 0) {
      return `(${parsed.errors.map((error) => (typeof error === 'string' ? error : [error.title, error.detail].filter(Boolean).join(': '))).join('; ')})`;
    }
  } catch {
    // not the intake's JSON
  }
  return body.length > 0 ? `(${body.slice(0, 200)})` : '';
}
