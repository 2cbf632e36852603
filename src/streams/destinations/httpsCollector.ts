import { signatureHeaders } from '../../client/webhookSigning.ts';
import { outcomeOfStatus, retryAfterMs, type Destination, type EncodedBatch, type SendOutcome } from './destination.ts';
import { type HttpAnswer, type HttpPoster, outcomeOfNetworkFailure } from './httpPoster.ts';
import { header } from './splunkHec.ts';

/**
 * A plain HTTPS collector: each batch POSTed as gzipped NDJSON (one record a line), signed like a webhook
 * delivery (`X-Service-Signature` and the Standard Webhooks headers, over the request body as sent, i.e.
 * the gzipped bytes), with the stream, tenant and leaves it carries in headers. `webhook-id` is the batch's
 * id, `<stream>.<tenant>.<first leaf>-<last leaf>`: a batch sent again after a crash may be cut differently,
 * so receivers deduplicate on event_id, not on it. Any 2xx acknowledges; 5 MB of NDJSON at most a request.
 */
export class HttpsCollector implements Destination {
  private readonly endpoint: URL;
  private readonly signingSecret: string;
  private readonly poster: HttpPoster;

  constructor(url: string, signingSecret: string, poster: HttpPoster) {
    this.endpoint = new URL(url);
    this.signingSecret = signingSecret;
    this.poster = poster;
  }

  async send(batch: EncodedBatch): Promise<SendOutcome> {
    const { body } = batch;
    const batchId = `${batch.streamId}.${batch.tenantId}.${batch.firstLeaf}-${batch.lastLeaf}`;
    let answer: HttpAnswer;
    try {
      answer = await this.poster.post(
        this.endpoint,
        {
          ...signatureHeaders([this.signingSecret], batchId, body),
          'content-type': 'application/x-ndjson',
          'content-encoding': 'gzip',
          'user-agent': 'audit-trail-streams',
          'x-audit-stream-id': batch.streamId,
          'x-audit-tenant-id': batch.tenantId,
          'x-audit-first-leaf': String(batch.firstLeaf),
          'x-audit-last-leaf': String(batch.lastLeaf),
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
