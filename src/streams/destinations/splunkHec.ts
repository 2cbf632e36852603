import { randomUUID } from 'node:crypto';
import { outcomeOfStatus, retryAfterMs, type Destination, type EncodedBatch, type SendOutcome } from './destination.ts';
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
 * event object (itemEncoders.ts' HecItems), the events of a batch concatenated in one gzipped request with
 * `Authorization: Splunk <token>`. Every request names a channel
 * (X-Splunk-Request-Channel, one per stream and process), which a token with indexer acknowledgement
 * requires and any other ignores. HEC answers `{"text", "code"}`; its code is kept in last_error.
 */
export class SplunkHec implements Destination {
  private readonly settings: SplunkHecSettings;
  private readonly poster: HttpPoster;
  private readonly endpoint: URL;
  private readonly channel = randomUUID();

  constructor(settings: SplunkHecSettings, poster: HttpPoster) {
    this.settings = settings;
    this.poster = poster;
    this.endpoint = new URL(`${settings.url.replace(/\/+$/, '')}/services/collector/event`);
  }

  async send(batch: EncodedBatch): Promise<SendOutcome> {
    const { body } = batch;
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
