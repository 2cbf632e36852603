import { randomUUID } from 'node:crypto';
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

export interface SplunkHecSettings {
  readonly url: string;
  readonly token: string;
  readonly index?: string;
  readonly source?: string;
  readonly sourcetype?: string;
}

/**
 * Splunk's HTTP Event Collector, JSON event endpoint (`/services/collector/event`): each record is one
 * event object `{"time", "source", "sourcetype", "index"?, "event"}`, the events of a batch concatenated in
 * one gzipped request with `Authorization: Splunk <token>`. A request stays under 1 MB before compression,
 * Splunk Cloud's maximum content length (Splunk Enterprise allows more). Every request names a channel
 * (X-Splunk-Request-Channel, one per stream and process), which a token with indexer acknowledgement
 * requires and any other ignores. HEC answers `{"text", "code"}`; its code is kept in last_error.
 */
export class SplunkHec implements Destination {
  readonly limits: BatchLimits = { maxItems: 10_000, maxBytes: 1_000_000 };
  readonly framing: BodyFraming = { open: '', separator: '\n', close: '' };
  private readonly settings: SplunkHecSettings;
  private readonly poster: HttpPoster;
  private readonly endpoint: URL;
  private readonly sourcetype: string;
  private readonly channel = randomUUID();
  /** The members every record shares, after `time`, as JSON text: `,"host":…,"source":…(,"index":…)`. */
  private readonly sharedMembers: string;
  /** The shared members and the event records' sourcetype: written once, not per record. */
  private readonly eventMembers: string;

  constructor(settings: SplunkHecSettings, format: StreamFormat, poster: HttpPoster) {
    this.settings = settings;
    this.poster = poster;
    this.endpoint = new URL(`${settings.url.replace(/\/+$/, '')}/services/collector/event`);
    this.sourcetype = settings.sourcetype ?? `audit-trail:${format}`;
    this.sharedMembers = `,"host":"audit-trail","source":${JSON.stringify(settings.source ?? 'audit-trail')}${
      settings.index === undefined ? '' : `,"index":${JSON.stringify(settings.index)}`
    }`;
    this.eventMembers = `${this.sharedMembers},"sourcetype":${JSON.stringify(this.sourcetype)}`;
  }

  encode(record: StreamRecord): Item {
    // HEC's time is epoch seconds, with the milliseconds as a fraction.
    const time = (record.timestampMs / 1000).toFixed(3);
    const members = record.kind === 'event' ? this.eventMembers : `${this.sharedMembers},"sourcetype":"audit-trail:${record.kind}"`;
    return [`{"time":${time}${members},"event":`, record.json, '}'];
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
          authorization: `Splunk ${this.settings.token}`,
          'content-type': 'application/json',
          'content-encoding': 'gzip',
          'x-splunk-request-channel': this.channel,
          'user-agent': 'audit-trail-streams',
        },
        body,
      );
    } catch (error) {
      return outcomeOfNetworkFailure(error);
    }
    return outcomeOfStatus(
      answer.status,
      `HEC answered ${answer.status} ${hecText(answer.body)}`,
      retryAfterMs(header(answer.headers['retry-after'])),
    );
  }

  close(): Promise<void> {
    return this.poster.close();
  }
}

/** HEC's `{"text": ..., "code": N}`, as `code N: text`; any other body as its start. */
function hecText(body: string): string {
  try {
    const parsed = JSON.parse(body) as { text?: unknown; code?: unknown };
    if (typeof parsed.text === 'string') return `(code ${String(parsed.code)}: ${parsed.text})`;
  } catch {
    // not HEC's JSON
  }
  return body.length > 0 ? `(${body.slice(0, 200)})` : '';
}

export function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
