import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * Webhook signing secrets at rest (docs/webhooks.md): AES-256-GCM under SECRET_ENCRYPTION_KEY, stored as
 * version byte ‖ 12-byte IV ‖ 16-byte tag ‖ ciphertext. The version byte leaves room for key rotation.
 */
const FORMAT_VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;

export class SecretBox {
  private readonly key: Buffer;

  /** @param keyHex 64 hex characters (validated by the configuration). */
  constructor(keyHex: string) {
    this.key = Buffer.from(keyHex, 'hex');
    if (this.key.length !== 32) throw new Error('SecretBox needs a 256-bit key');
  }

  seal(plaintext: string): Buffer {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return Buffer.concat([Buffer.of(FORMAT_VERSION), iv, cipher.getAuthTag(), ciphertext]);
  }

  /** Throws when the box was sealed under another key or altered. */
  open(sealed: Buffer): string {
    if (sealed[0] !== FORMAT_VERSION) throw new Error(`unknown secret format ${sealed[0]}`);
    const iv = sealed.subarray(1, 1 + IV_BYTES);
    const tag = sealed.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES);
    const decipher = createDecipheriv('aes-256-gcm', this.key, iv);
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(sealed.subarray(1 + IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
  }
}

/**
 * What an attempt needs of an endpoint that is sealed, as stored: its HMAC secret and Ed25519 key (each the
 * current one, and the one a rotation replaced while its overlap lasts), which of the two sign, and its
 * custom headers.
 */
export interface SealedSecrets {
  readonly current: Buffer;
  readonly previous: { readonly ciphertext: Buffer; readonly expiresAt: Date } | null;
  /** Whether deliveries carry HMAC signatures (v1). */
  readonly hmac: boolean;
  /** The sealed Ed25519 seeds when deliveries carry Ed25519 signatures (v1a); the previous one signs until previous.expiresAt. */
  readonly ed25519: { readonly current: Buffer; readonly previous: Buffer | null } | null;
  /** The custom headers, sealed; null for none. */
  readonly headers: Buffer | null;
}

/** The sealed keys that sign at `nowMs`, newest first within each scheme. */
export interface SigningSecrets {
  readonly hmac: Buffer[];
  readonly ed25519: Buffer[];
}

/**
 * The sealed keys that sign at `nowMs` (docs/webhooks.md "Rotating the signing secret"): of each scheme the
 * endpoint signs with, the current key, and the previous one until its expiry, never after. The store
 * applies the same rule at the time of its read (endpointSecretsStore.ts, PREVIOUS_SECRET_SIGNS); this
 * applies it again at the moment of signing.
 */
export function secretsSigningAt(sealed: SealedSecrets, nowMs: number): SigningSecrets {
  const overlapping = sealed.previous !== null && nowMs < sealed.previous.expiresAt.getTime();
  const hmac = !sealed.hmac ? [] : overlapping ? [sealed.current, sealed.previous!.ciphertext] : [sealed.current];
  const keys = sealed.ed25519;
  const ed25519 = keys === null ? [] : overlapping && keys.previous !== null ? [keys.current, keys.previous] : [keys.current];
  return { hmac, ed25519 };
}

/** 32 random bytes as 64 hex: the endpoint's signing secret, shown to its owner once. */
export function generateWebhookSecret(): string {
  return randomBytes(32).toString('hex');
}

/** A new Ed25519 signing key: its 32-byte seed, sealed as base64 text. */
export function generateEd25519Seed(): Buffer {
  return randomBytes(32);
}

export function generateWebhookId(): string {
  return `wh_${randomBytes(16).toString('hex')}`;
}
