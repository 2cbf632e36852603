import { outcomeOfStatus, retryAfterMs, type Destination, type EncodedBatch, type SendOutcome } from './destination.ts';
import { type HttpAnswer, type HttpPoster, outcomeOfNetworkFailure } from './httpPoster.ts';
import { header } from './splunkHec.ts';

export interface DatadogSettings {
  readonly url: string;
  readonly api_key: string;
  readonly service?: string;
  readonly tags?: readonly string[];
}

/**
 * Datadog's logs intake, HTTP API v2 (`POST /api/v2/logs`): a JSON array of log entries (itemEncoders.ts' DatadogItems),
 * gzipped, with `DD-API-KEY`; at most 1,000 entries and 5 MB before compression per request, as the intake
 * documents.
 */
export class DatadogLogs implements Destination {
  private readonly settings: DatadogSettings;
  private readonly poster: HttpPoster;
  private readonly endpoint: URL;

  constructor(settings: DatadogSettings, poster: HttpPoster) {
    this.settings = settings;
    this.poster = poster;
    this.endpoint = new URL(`${settings.url.replace(/\/+$/, '')}/api/v2/logs`);
  }

  async send(batch: EncodedBatch): Promise<SendOutcome> {
    const { body } = batch;
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
