import { createHash } from 'node:crypto';
import { type ObjectStore, type ObjectStoreSettings, openObjectStore } from '../platform/objectStore.ts';

/** The deployment's S3-compatible store for archives (ARCHIVE_S3_*); the bucket and prefix are the policy's. */
export type ArchiveStoreSettings = ObjectStoreSettings;

/** Why an archive could not be relied on: nothing of its range is expired. */
export class ArchiveError extends Error {}

/**
 * Writes an archive object and reads it back. Nothing is removed on the strength of a successful PUT alone:
 * the object is fetched again and its bytes must hash to what was written (a store that truncated,
 * transcoded or lost it answers differently), else the caller expires nothing. The SDK is loaded on the
 * first archive, as the log streams' S3 destination does: most processes never need it.
 */
export class ArchiveStore {
  private readonly settings: ArchiveStoreSettings;
  private client: ObjectStore | undefined;

  constructor(settings: ArchiveStoreSettings) {
    this.settings = settings;
  }

  private open(): ObjectStore {
    // A failed pass is retried by the next one; a few attempts ride out a store's brief hiccup.
    this.client ??= openObjectStore(this.settings, 3);
    return this.client;
  }

  /** PUT, then GET and compare: resolves only when the stored bytes are exactly `body`. */
  async writeAndCheck(bucket: string, key: string, body: Buffer, metadata: Record<string, string>): Promise<void> {
    const { client, sdk } = await this.open();
    const sha256 = createHash('sha256').update(body).digest('hex');
    try {
      await client.send(
        new sdk.PutObjectCommand({
          Bucket: bucket,
          Key: key,
          Body: body,
          // A gzip file, as the streams' objects: a Content-Encoding would have clients unpack it on download.
          ContentType: 'application/gzip',
          Metadata: { ...metadata, sha256 },
        }),
      );
    } catch (error) {
      throw new ArchiveError(`writing s3://${bucket}/${key} failed: ${describe(error)}`);
    }
    let stored: Uint8Array;
    try {
      const read = await client.send(new sdk.GetObjectCommand({ Bucket: bucket, Key: key }));
      stored = (await read.Body?.transformToByteArray()) ?? new Uint8Array();
    } catch (error) {
      throw new ArchiveError(`reading back s3://${bucket}/${key} failed: ${describe(error)}`);
    }
    const readSha256 = createHash('sha256').update(stored).digest('hex');
    if (readSha256 !== sha256)
      throw new ArchiveError(
        `s3://${bucket}/${key} read back ${stored.length} bytes hashing ${readSha256}, not the ${body.length} written (${sha256})`,
      );
  }

  async close(): Promise<void> {
    // Only a store that was opened has a client to close; opening one just to close it would load the SDK.
    const opened = this.client;
    if (opened !== undefined) (await opened).client.destroy();
  }
}

function describe(error: unknown): string {
  return (error instanceof Error ? `${error.name}: ${error.message}` : String(error)).slice(0, 300);
}
