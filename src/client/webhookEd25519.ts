import { createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';

/**
 * Standard Webhooks' asymmetric scheme, `v1a` (docs/webhooks.md "Ed25519 signatures"): Ed25519 over
 * `<webhook-id>.<webhook-timestamp>.<raw body>`, the bytes the v1 HMAC signs, with the signature in
 * `webhook-signature` as `v1a,<base64>`. Keys are written as the specification writes them: `whpk_` and the
 * base64 of the 32-byte public key, `whsk_` and the base64 of the 32-byte seed. A receiver verifies with the
 * public key and holds no secret. Only Node's own crypto.
 */

export const PUBLIC_KEY_PREFIX = 'whpk_';

// The DER framing of a raw Ed25519 key (RFC 8410): what Node imports without needing the other half.
const PKCS8_SEED_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const SPKI_PUBLIC_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
const KEY_BYTES = 32;

/** The signing key of a 32-byte seed. */
export function ed25519SigningKey(seed: Buffer): KeyObject {
  if (seed.length !== KEY_BYTES) throw new RangeError('an Ed25519 seed is 32 bytes');
  return createPrivateKey({ key: Buffer.concat([PKCS8_SEED_PREFIX, seed]), format: 'der', type: 'pkcs8' });
}

/** A public key from its `whpk_` form, its bare base64, or its 32 raw bytes. */
export function ed25519PublicKey(key: string | Buffer): KeyObject {
  const raw =
    typeof key === 'string' ? Buffer.from(key.startsWith(PUBLIC_KEY_PREFIX) ? key.slice(PUBLIC_KEY_PREFIX.length) : key, 'base64') : key;
  if (raw.length !== KEY_BYTES) throw new RangeError('an Ed25519 public key is 32 bytes');
  return createPublicKey({ key: Buffer.concat([SPKI_PUBLIC_PREFIX, raw]), format: 'der', type: 'spki' });
}

/** The 32 raw bytes of a public key (of a signing key: its public half). */
export function rawPublicKey(key: KeyObject): Buffer {
  const der = (key.type === 'private' ? createPublicKey(key) : key).export({ format: 'der', type: 'spki' });
  return der.subarray(der.length - KEY_BYTES);
}

/** The `whpk_` form of a public key's raw bytes, as the API serves it. */
export function publicKeyText(raw: Buffer): string {
  return `${PUBLIC_KEY_PREFIX}${raw.toString('base64')}`;
}

/** The v1a signature's bytes. */
export function asymmetricSignatureOf(key: KeyObject, id: string, timestamp: number, rawBody: Buffer | string): Buffer {
  return sign(null, signedBytes(id, timestamp, rawBody), key);
}

/** Whether `signature` is the v1a signature of the content under the public key `key`. */
export function verifiesAsymmetric(key: KeyObject, id: string, timestamp: number, rawBody: Buffer | string, signature: Buffer): boolean {
  return verify(null, signedBytes(id, timestamp, rawBody), key, signature);
}

function signedBytes(id: string, timestamp: number, rawBody: Buffer | string): Buffer {
  const prefix = Buffer.from(`${id}.${timestamp}.`, 'utf8');
  return Buffer.concat([prefix, typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody]);
}
