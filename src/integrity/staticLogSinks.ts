import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { type ObjectStore, type ObjectStoreSettings, openObjectStore } from '../platform/objectStore.ts';
import type { StaticLogSink } from './staticLog.ts';

/** Where `audit-trail integrity publish` writes a static copy: a directory, or the archive bucket (ARCHIVE_S3_*). */

export function directorySink(root: string): StaticLogSink {
  return {
    async read(path) {
      return readFile(join(root, path), 'utf8').catch((error: NodeJS.ErrnoException) => {
        if (error.code === 'ENOENT') return undefined;
        throw error;
      });
    },
    async write(path, body) {
      const target = join(root, path);
      await mkdir(dirname(target), { recursive: true });
      // Renamed into place: a static server never serves half a tile.
      await writeFile(`${target}.tmp`, body);
      await rename(`${target}.tmp`, target);
    },
  };
}

// What tlog-tiles asks of a server: full tiles long-lived, partial ones and the checkpoint short-lived.
const CACHE_CONTROL = { full: 'public, max-age=31536000, immutable', partial: 'public, max-age=60', checkpoint: 'public, max-age=5' };

export function bucketSink(settings: ObjectStoreSettings, bucket: string, prefix: string): StaticLogSink & { close(): void } {
  let opened: ObjectStore | undefined;
  // Publishing is run by hand or on a schedule: a few attempts ride out a store's brief hiccup.
  const open = () => {
    opened ??= openObjectStore(settings, 3);
    return opened;
  };
  const key = (path: string) => `${prefix.replace(/\/+$/, '')}${prefix ? '/' : ''}${path}`;
  return {
    async read(path) {
      const { client, sdk } = await open();
      try {
        const read = await client.send(new sdk.GetObjectCommand({ Bucket: bucket, Key: key(path) }));
        return (await read.Body?.transformToString('utf8')) ?? undefined;
      } catch (error) {
        if ((error as { name?: string }).name === 'NoSuchKey') return undefined;
        throw error;
      }
    },
    async write(path, body, kind) {
      const { client, sdk } = await open();
      await client.send(
        new sdk.PutObjectCommand({
          Bucket: bucket,
          Key: key(path),
          Body: body,
          ContentType: kind === 'checkpoint' ? 'text/plain; charset=utf-8' : 'application/octet-stream',
          CacheControl: CACHE_CONTROL[kind],
        }),
      );
    },
    close() {
      void opened?.then(({ client }) => client.destroy());
    },
  };
}
