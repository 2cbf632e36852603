import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';
import { standardSignatureOf } from '../../client/webhookSignature.ts';
import { signDelivery } from '../../client/webhookSigning.ts';
import { outcomeOfStatus, retryAfterMs, type Destination, type EncodedBatch, type SendOutcome } from './destination.ts';
import { type HttpAnswer, type HttpPoster, outcomeOfNetworkFailure } from './httpPoster.ts';
import { header } from './splunkHec.ts';
import { systemClock } from '../../platform/clock.ts';

const gunzipped = promisify(gunzip);

/**
 * A plain HTTPS collector: each batch POSTed gzipped (`Content-Encoding: gzip`), as NDJSON (one record a line)
 * or one JSON array (`body: json`), with the stream, tenant and leaves it carries in headers, and signed two
 * ways:
 *
 * - `X-Service-Signature` as webhook deliveries are, over the request body as sent (the gzipped bytes): what
 *   receivers of this service have always checked;
 * - the Standard Webhooks headers (`webhook-id`, `webhook-timestamp`, `webhook-signature`) over the body as the
 *   receiver's framework hands it to the Standard Webhooks libraries (`standardwebhooks`, `svix`): decoded
 *   from its Content-Encoding, the NDJSON or JSON text. Their key is the secret's `whsec_` form.
 *
 * `webhook-id` is the batch's id, `<stream>.<tenant>.<first leaf>-<last leaf>`: a batch sent again after a
 * crash may be cut differently, so receivers deduplicate on event_id, not on it. Any 2xx acknowledges; 5 MB
 * of records at most a request.
 */
export class HttpsCollector implements Destination {
  private readonly endpoint: URL;
  private readonly contentType: string;
  private readonly signingSecret: string;
  private readonly poster: HttpPoster;

  constructor(settings: { readonly url: string; readonly body?: 'ndjson' | 'json' }, signingSecret: string, poster: HttpPoster) {
    this.endpoint = new URL(settings.url);
    this.contentType = settings.body === 'json' ? 'application/json' : 'application/x-ndjson';
    this.signingSecret = signingSecret;
    this.poster = poster;
  }

  async send(batch: EncodedBatch): Promise<SendOutcome> {
    const { body } = batch;
    const batchId = `${batch.streamId}.${batch.tenantId}.${batch.firstLeaf}-${batch.lastLeaf}`;
    const nowMs = systemClock.now();
    const timestamp = Math.floor(nowMs / 1000);
    // Unpacked off the event loop: a batch is up to 5 MB of text.
    const content = await gunzipped(body);
    let answer: HttpAnswer;
    try {
      answer = await this.poster.post(
        this.endpoint,
        {
          'x-service-signature': signDelivery(this.signingSecret, body, nowMs),
          'webhook-id': batchId,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': `v1,${standardSignatureOf(this.signingSecret, batchId, timestamp, content).toString('base64')}`,
          'content-type': this.contentType,
          'content-encoding': 'gzip',
          'user-agent': 'audit-trail-streams',
          'x-audit-stream-id': batch.streamId,
          'x-audit-tenant-id': batch.tenantId,
          'x-audit-first-leaf': String(batch.firstLeaf),
          'x-audit-last-leaf': String(batch.lastLeaf),
          ...(batch.treeHead === undefined ? {} : { 'x-audit-tree-head': treeHeadHeader(batch.treeHead) }),
        },
        body,
      );
    } catch (error) {
      return outcomeOfNetworkFailure(error);
    }
    const excerpt = answer.body.length > 0 ? ` (${answer.body.slice(0, 200)})` : '';
    if (answer.status >= 300 && answer.status < 400)
      return { kind: 'refused', reason: `the collector answered ${answer.status}: redirects are not followed` };
    return outcomeOfStatus(
      answer.status,
      `the collector answered ${answer.status}${excerpt}`,
      retryAfterMs(header(answer.headers['retry-after'])),
    );
  }

  close(): Promise<void> {
    return this.poster.close();
  }
}

/** The tree head record's JSON, `{"tree_head": …}`, as an HTTP header value: base64url, header-safe whatever it holds. */
function treeHeadHeader(json: string): string {
  return Buffer.from(json, 'utf8').toString('base64url');
}
