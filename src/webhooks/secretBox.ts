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

/** An endpoint's secrets as stored: the current one, and the one a rotation replaced while its overlap lasts. */
export interface SealedSecrets {
  readonly current: Buffer;
  readonly previous: { readonly ciphertext: Buffer; readonly expiresAt: Date } | null;
}

/**
 * The sealed secrets that sign at `nowMs`, newest first (docs/webhooks.md "Rotating the signing secret"): the
 * current one, and the previous one until its expiry, never after. The store applies the same rule at the
 * time of its read (endpointSecretsStore.ts, PREVIOUS_SECRET_SIGNS); this applies it again at the moment of signing.
 */
export function secretsSigningAt(sealed: SealedSecrets, nowMs: number): Buffer[] {
  return sealed.previous !== null && nowMs < sealed.previous.expiresAt.getTime()
    ? [sealed.current, sealed.previous.ciphertext]
    : [sealed.current];
}

/** 32 random bytes as 64 hex: the endpoint's signing secret, shown to its owner once. */
export function generateWebhookSecret(): string {
  return randomBytes(32).toString('hex');
}

export function generateWebhookId(): string {
  return `wh_${randomBytes(16).toString('hex')}`;
}
