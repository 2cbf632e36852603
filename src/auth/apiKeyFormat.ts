import { createHmac, randomBytes, type KeyObject } from 'node:crypto';

export type KeyEnvironment = 'live' | 'test';

/** `atr_<env>_<8 hex lookup>_<32 hex secret>` (docs/api.md "Authentication and scopes"). */
const API_KEY_PATTERN = /^atr_(live|test)_([0-9a-f]{8})_([0-9a-f]{32})$/;

export interface ParsedApiKey {
  readonly environment: KeyEnvironment;
  readonly lookupId: string;
  readonly secret: string;
}

export function parseApiKey(text: string): ParsedApiKey | undefined {
  const match = API_KEY_PATTERN.exec(text);
  if (!match) return undefined;
  return { environment: match[1] as KeyEnvironment, lookupId: match[2]!, secret: match[3]! };
}

/** A new key: 32 bits of lookup id (checked for collisions on insert) and 128 random bits of secret. */
export function generateApiKey(environment: KeyEnvironment): ParsedApiKey & { readonly key: string } {
  const lookupId = randomBytes(4).toString('hex');
  const secret = randomBytes(16).toString('hex');
  return { environment, lookupId, secret, key: `atr_${environment}_${lookupId}_${secret}` };
}

/**
 * HMAC-SHA-256 of the secret under the server pepper. The secret has 128 random bits, so a slow KDF adds
 * nothing; the pepper keeps a stolen table useless without the server's configuration.
 */
/** `pepper` as text or, on hot paths, as a KeyObject of its UTF-8 bytes (createHmac imports a text key per call). */
export function hashKeySecret(pepper: string | KeyObject, secret: string): Buffer {
  return createHmac('sha256', pepper).update(secret).digest();
}
