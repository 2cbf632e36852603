import type { S3Client } from '@aws-sdk/client-s3';

/** The deployment's S3-compatible store (ARCHIVE_S3_*): expiry's archives and the static copy of the log. */
export interface ObjectStoreSettings {
  readonly region: string;
  /** An S3-compatible endpoint (MinIO, Ceph, R2...); absent: AWS S3 of the region. */
  readonly endpoint?: string;
  /** Absent: the SDK's own chain (a pod's IAM role, the environment). */
  readonly accessKeyId?: string;
  readonly secretAccessKey?: string;
  readonly forcePathStyle: boolean;
}

export type ObjectStore = Promise<{ client: S3Client; sdk: typeof import('@aws-sdk/client-s3') }>;

/**
 * A client of the store, the SDK loaded only when first used (most processes never touch the store).
 * Checksums only where the operation requires them: S3-compatible stores reject the SDK's newer defaults.
 */
export function openObjectStore(settings: ObjectStoreSettings, maxAttempts: number): ObjectStore {
  const { region, endpoint, accessKeyId, secretAccessKey, forcePathStyle } = settings;
  return import('@aws-sdk/client-s3').then((sdk) => ({
    sdk,
    client: new sdk.S3Client({
      region,
      endpoint,
      forcePathStyle,
      ...(accessKeyId && secretAccessKey ? { credentials: { accessKeyId, secretAccessKey } } : {}),
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      maxAttempts,
    }),
  }));
}
