import { randomUUID } from 'node:crypto';
import { type Clock, systemClock } from '../../platform/clock.ts';
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
 * How long a batch HEC took with an `ackId` may stay unacknowledged before it is sent again
 * (STREAMS_HEC_ACK_TIMEOUT_MS): Splunk's own senders wait minutes (Amazon Data Firehose's HEC acknowledgement
 * timeout is 180 s by default), as an indexer under load may take that long.
 */
export const DEFAULT_HEC_ACK_TIMEOUT_MS = 180_000;
/** The first ack query after the batch; each next one waits twice as long, up to ACK_POLL_MAX_MS. */
export const ACK_POLL_FIRST_MS = 20;
export const ACK_POLL_MAX_MS = 1_000;
/** HEC's status code for a channel it does not know (any more): its pending acknowledgements are gone. */
const HEC_INVALID_CHANNEL = 11;

export interface HecAckOptions {
  readonly ackTimeoutMs: number;
  readonly clock: Clock;
}

/**
 * Splunk's HTTP Event Collector, JSON event endpoint (`/services/collector/event`): each record is one
 * event object (itemEncoders.ts' HecItems), the events of a batch concatenated in one gzipped request with
 * `Authorization: Splunk <token>`. Every request names a channel (X-Splunk-Request-Channel, one per stream
 * and process), which a token with indexer acknowledgement requires and any other ignores.
 *
 * Indexer acknowledgement: HEC's 200 only says the data looked valid. When it answers with an `ackId` (a token
 * with acknowledgement on), the batch is delivered only once `/services/collector/ack` on the channel says
 * that id is indexed; the queries back off from 20 ms to one a second. No acknowledgement within
 * ackTimeoutMs, or a channel HEC no longer knows (code 11: a restart, an idle channel cleaned up), means the
 * batch may be lost: it is a `retry`, sent again (on a new channel when the old one was lost). HEC answers
 * `{"text", "code"}`; its code is kept in last_error.
 */
export class SplunkHec implements Destination {
  private readonly settings: SplunkHecSettings;
  private readonly poster: HttpPoster;
  private readonly ack: HecAckOptions;
  private readonly endpoint: URL;
  private readonly ackEndpoint: URL;
  private channel = randomUUID();

  constructor(
    settings: SplunkHecSettings,
    poster: HttpPoster,
    ack: HecAckOptions = { ackTimeoutMs: DEFAULT_HEC_ACK_TIMEOUT_MS, clock: systemClock },
  ) {
    this.settings = settings;
    this.poster = poster;
    this.ack = ack;
    const base = settings.url.replace(/\/+$/, '');
    this.endpoint = new URL(`${base}/services/collector/event`);
    this.ackEndpoint = new URL(`${base}/services/collector/ack`);
  }

  async send(batch: EncodedBatch, signal?: AbortSignal): Promise<SendOutcome> {
    let answer: HttpAnswer;
    try {
      answer = await this.poster.post(this.endpoint, { ...this.headers(), 'content-encoding': 'gzip' }, batch.body);
    } catch (error) {
      return outcomeOfNetworkFailure(error);
    }
    const outcome = outcomeOfStatus(
      answer.status,
      `HEC answered ${answer.status} ${hecText(answer.body)}`,
      retryAfterMs(header(answer.headers['retry-after'])),
    );
    const ackId = outcome.kind === 'delivered' ? ackIdOf(answer.body) : undefined;
    return ackId === undefined ? outcome : await this.acknowledged(ackId, signal);
  }

  close(): Promise<void> {
    return this.poster.close();
  }

  private headers(): Record<string, string> {
    return {
      authorization: `Splunk ${this.settings.token}`,
      'content-type': 'application/json',
      'x-splunk-request-channel': this.channel,
      'user-agent': 'audit-trail-streams',
    };
  }

  /** Queries the channel until HEC says `ackId` is indexed: delivered; or the batch must go again: retry. */
  private async acknowledged(ackId: number, signal: AbortSignal | undefined): Promise<SendOutcome> {
    const { clock, ackTimeoutMs } = this.ack;
    const deadline = clock.now() + ackTimeoutMs;
    const query = Buffer.from(JSON.stringify({ acks: [ackId] }));
    let waitMs = ACK_POLL_FIRST_MS;
    let lastProblem = 'no answer yet';
    while (clock.now() < deadline) {
      await pause(clock, Math.min(waitMs, deadline - clock.now()), signal);
      if (signal?.aborted) return { kind: 'retry', reason: `stopped before HEC acknowledged ackId ${ackId}` };
      waitMs = Math.min(waitMs * 2, ACK_POLL_MAX_MS);
      let answer: HttpAnswer;
      try {
        answer = await this.poster.post(this.ackEndpoint, this.headers(), query);
      } catch (error) {
        lastProblem = outcomeOfNetworkFailure(error).kind === 'refused' ? 'the target was refused' : 'the ack query got no answer';
        continue;
      }
      const status = ackStatus(answer.body, ackId);
      if (answer.status === 200 && status === true) return { kind: 'delivered' };
      if (answer.status === 200 && status === false) continue;
      const code = hecCode(answer.body);
      if (code === HEC_INVALID_CHANNEL) {
        // The channel and what was pending on it are gone: the batch goes again, on a channel of its own.
        this.channel = randomUUID();
        return { kind: 'retry', reason: `HEC lost the channel before acknowledging ackId ${ackId} ${hecText(answer.body)}: sending again` };
      }
      if (answer.status === 401 || answer.status === 403)
        return { kind: 'refused', reason: `HEC refused the ack query: ${answer.status} ${hecText(answer.body)}` };
      lastProblem = `the ack query was answered ${answer.status} ${hecText(answer.body)}`;
    }
    return {
      kind: 'retry',
      reason: `HEC did not acknowledge ackId ${ackId} within ${Math.round(ackTimeoutMs / 1000)} s (${lastProblem}): sending again`,
    };
  }
}

/** Waits `ms` on the clock, or until `signal` aborts. */
function pause(clock: Clock, ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      cancel();
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const cancel = clock.setTimer(done, Math.max(0, ms));
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** The `ackId` of HEC's answer to an event request: present only for a token with indexer acknowledgement. */
function ackIdOf(body: string): number | undefined {
  const ackId = parsed(body)?.ackId;
  return typeof ackId === 'number' && Number.isSafeInteger(ackId) && ackId >= 0 ? ackId : undefined;
}

/** `{"acks": {"<id>": true|false}}` for our id; undefined for any other answer. */
function ackStatus(body: string, ackId: number): boolean | undefined {
  const acks = parsed(body)?.acks;
  if (typeof acks !== 'object' || acks === null) return undefined;
  const status = (acks as Record<string, unknown>)[String(ackId)];
  return typeof status === 'boolean' ? status : undefined;
}

function hecCode(body: string): number | undefined {
  const code = parsed(body)?.code;
  return typeof code === 'number' ? code : undefined;
}

function parsed(body: string): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(body) as unknown;
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** HEC's `{"text": ..., "code": N}`, as `code N: text`; any other body as its start. */
function hecText(body: string): string {
  const answer = parsed(body);
  if (typeof answer?.text === 'string') return `(code ${String(answer.code)}: ${answer.text})`;
  return body.length > 0 ? `(${body.slice(0, 200)})` : '';
}

export function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
