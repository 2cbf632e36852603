import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { S3Client } from '@aws-sdk/client-s3';
import { guardedLookup, literalTargetRefusal } from '../../webhooks/targetGuard.ts';
import type { Destination, EncodedBatch, SendOutcome } from './destination.ts';
import { outcomeOfNetworkFailure } from './httpPoster.ts';

export interface S3Settings {
  readonly bucket: string;
  readonly prefix: string;
  readonly region: string;
  readonly endpoint?: string;
  readonly access_key_id: string;
  readonly secret_access_key: string;
  readonly force_path_style?: boolean;
}

export interface S3Options {
  readonly timeoutMs: number;
  readonly allowPrivateTargets: boolean;
}

/** What an `.ndjson.gz` object is: a gzip file (RFC 6713), so that every client downloads it as it is. */
const GZIP_CONTENT_TYPE = 'application/gzip';

/** S3 error codes that are no one's fault and pass: the same object is put again after a backoff. */
const TRANSIENT_CODES = new Set([
  'SlowDown',
  'InternalError',
  'ServiceUnavailable',
  'RequestTimeout',
  'RequestTimeTooSkewed',
  'Throttling',
]);

/**
 * S3 and S3-compatible object storage (`@aws-sdk/client-s3`): each batch is one gzipped NDJSON object,
 * `<prefix>/<tenant>/<yyyy>/<mm>/<dd>/<first leaf>-<last leaf>-<stream>.ndjson.gz`, dated by the day the
 * batch was made, its leaves zero-padded to 16 digits, so that a listing in key order is the trail's
 * order and no two batches of a stream share a name. A batch sent again after a crash may be cut
 * differently and overlap an object already written: consumers deduplicate on event_id.
 *
 * A batch whose tree head travels beside its records (OCSF streams: EncodedBatch.treeHead) has it in an object
 * of its own, `<prefix>/_tree_heads/<tenant>/<yyyy>/<mm>/<dd>/<first leaf>-<last leaf>-<stream>.json`, one
 * `{"tree_head": …}` line, written before the batch's object and only when the head differs from the last
 * one this process wrote for the tenant: the records' objects hold OCSF events only, and `verify
 * --stream-copy` reads the heads' objects beside them. `_tree_heads` is no tenant (a tenant id starts with a
 * letter or a digit).
 *
 * Checksums are computed only where S3 requires them, and uploads are plain (no aws-chunked encoding),
 * which every S3-compatible store understands. Connections go through the webhooks' SSRF guard.
 */
export class S3Objects implements Destination {
  private readonly settings: S3Settings;
  /**
   * Loaded when the first S3 stream is opened: the SDK takes a noticeable part of a second to load, which
   * every process importing the streams slice (the api role for test sends) would otherwise pay at start.
   */
  private readonly client: Promise<{ client: S3Client; sdk: typeof import('@aws-sdk/client-s3') }>;
  /** Why the endpoint's literal address is refused, when it is (a name is checked by each connection's lookup). */
  private readonly blocked: string | undefined;
  /** The last tree head written beside the records, by tenant: the next is written only when it differs. */
  private readonly headsWritten = new Map<string, string>();

  constructor(settings: S3Settings, options: S3Options) {
    this.settings = settings;
    const endpoint = settings.endpoint ? new URL(settings.endpoint) : undefined;
    this.blocked = endpoint && !options.allowPrivateTargets ? literalTargetRefusal(endpoint) : undefined;
    const lookup = options.allowPrivateTargets ? {} : { lookup: guardedLookup };
    this.client = import('@aws-sdk/client-s3').then((sdk) => ({
      sdk,
      client: new sdk.S3Client({
        region: settings.region,
        endpoint: settings.endpoint,
        forcePathStyle: settings.force_path_style ?? false,
        credentials: { accessKeyId: settings.access_key_id, secretAccessKey: settings.secret_access_key },
        requestChecksumCalculation: 'WHEN_REQUIRED',
        responseChecksumValidation: 'WHEN_REQUIRED',
        // One attempt per send: the stream retries with its own backoff, forever.
        maxAttempts: 1,
        requestHandler: {
          httpAgent: new HttpAgent({ keepAlive: true, ...lookup }),
          httpsAgent: new HttpsAgent({ keepAlive: true, ...lookup }),
          connectionTimeout: options.timeoutMs,
          requestTimeout: options.timeoutMs,
          throwOnRequestTimeout: true,
        },
      }),
    }));
  }

  /** The object key of a batch. */
  keyOf(batch: EncodedBatch): string {
    return `${this.settings.prefix}/${batch.tenantId}/${this.datedName(batch)}.ndjson.gz`;
  }

  /** The object key of the tree head beside a batch's records. */
  headKeyOf(batch: EncodedBatch): string {
    return `${this.settings.prefix}/_tree_heads/${batch.tenantId}/${this.datedName(batch)}.json`;
  }

  /** `<yyyy>/<mm>/<dd>/<first leaf>-<last leaf>-<stream>`. */
  private datedName(batch: EncodedBatch): string {
    const day = new Date(batch.createdAtMs).toISOString().slice(0, 10).replaceAll('-', '/');
    const leaves = `${String(batch.firstLeaf).padStart(16, '0')}-${String(batch.lastLeaf).padStart(16, '0')}`;
    return `${day}/${leaves}-${batch.streamId}`;
  }

  async send(batch: EncodedBatch): Promise<SendOutcome> {
    if (this.blocked) return { kind: 'refused', reason: this.blocked };
    const { client, sdk } = await this.client;
    try {
      const head = batch.treeHead;
      if (head !== undefined && this.headsWritten.get(batch.tenantId) !== head) {
        await client.send(
          new sdk.PutObjectCommand({
            Bucket: this.settings.bucket,
            Key: this.headKeyOf(batch),
            Body: `${head}\n`,
            ContentType: 'application/json',
          }),
        );
        this.headsWritten.set(batch.tenantId, head);
      }
      await client.send(
        new sdk.PutObjectCommand({
          Bucket: this.settings.bucket,
          Key: this.keyOf(batch),
          Body: batch.body,
          // The object is a gzip file, not NDJSON sent compressed: with Content-Encoding: gzip, fetch, curl and
          // Python's requests unpack it on download and save a `.ndjson.gz` that is not gzip.
          ContentType: GZIP_CONTENT_TYPE,
          Metadata: {
            'stream-id': batch.streamId,
            'tenant-id': batch.tenantId,
            'first-leaf': String(batch.firstLeaf),
            'last-leaf': String(batch.lastLeaf),
          },
        }),
      );
      return { kind: 'delivered' };
    } catch (error) {
      if (!(error instanceof sdk.S3ServiceException)) return outcomeOfNetworkFailure(error);
      const status = error.$metadata.httpStatusCode ?? 0;
      const reason = `S3 answered ${status} ${error.name}: ${error.message.slice(0, 200)}`;
      if (TRANSIENT_CODES.has(error.name) || status === 429 || status >= 500 || status === 0) return { kind: 'retry', reason };
      if (status === 413 || error.name === 'EntityTooLarge') return { kind: 'too_large', reason };
      return { kind: 'refused', reason };
    }
  }

  async close(): Promise<void> {
    (await this.client).client.destroy();
  }
}
