import { createHmac, timingSafeEqual, type Hmac, type KeyObject } from 'node:crypto';
import { PUBLIC_KEY_PREFIX, ed25519PublicKey, verifiesAsymmetric } from './webhookEd25519.ts';

/**
 * The `X-Service-Signature` scheme (docs/webhooks.md "Verifying the signature"): `t=<unix seconds>,v1=<hex>` where v1 is
 * HMAC-SHA-256, keyed with the endpoint secret (its hex text, as the owner received it), over
 * `t=<t>.` followed by the raw body bytes. Receivers verify with this module; the service signs with
 * the same signatureOf (webhookSigning.ts), so the two cannot drift apart.
 */

export const DEFAULT_SIGNATURE_TOLERANCE_S = 300;

/**
 * The Standard Webhooks form of an endpoint secret (docs/webhooks.md "Standard Webhooks"): `whsec_` and the
 * base64 of the HMAC key's bytes. The key of both schemes is the 64-hex secret's text as the owner received
 * it (64 ASCII bytes), not the 32 bytes the hex spells: X-Service-Signature has always been keyed with the
 * text, and one key for both keeps every existing receiver working.
 */
export function standardWebhooksSecretOf(secret: string): string {
  return `whsec_${Buffer.from(secret, 'utf8').toString('base64')}`;
}

/** The Standard Webhooks v1 signature's bytes: HMAC-SHA-256 over `<webhook-id>.<webhook-timestamp>.<body>`. */
export function standardSignatureOf(secret: string | Buffer | KeyObject, id: string, timestamp: number, rawBody: Buffer | string): Buffer {
  return signedContent(createHmac('sha256', secret), `${id}.${timestamp}.`, rawBody).digest();
}

/** The v1 signature's bytes: the endpoint secret's text, or a KeyObject made from its bytes. */
export function signatureOf(secret: string | KeyObject, timestamp: number, rawBody: Buffer | string): Buffer {
  return signedContent(createHmac('sha256', secret), `t=${timestamp}.`, rawBody).digest();
}

/**
 * The HMAC fed the prefix and the body. A text body goes in as one string with its prefix: a second
 * update call cost more than the copy it saves (the worker signs every attempt twice).
 */
function signedContent(hmac: Hmac, prefix: string, rawBody: Buffer | string): Hmac {
  return typeof rawBody === 'string' ? hmac.update(prefix + rawBody) : hmac.update(prefix).update(rawBody);
}

export interface VerifyOptions {
  /** Largest accepted |now − t| in seconds; 300 by default (docs/webhooks.md). */
  readonly toleranceS?: number;
  /** The receiver's clock, in epoch milliseconds. */
  readonly now?: number;
}

export type VerificationFailure = 'malformed_header' | 'timestamp_out_of_tolerance' | 'signature_mismatch';

export type VerificationResult =
  | { readonly valid: true; readonly timestamp: number }
  | { readonly valid: false; readonly reason: VerificationFailure };

/**
 * Verifies a delivery as a receiver should: parse, check the clock window, recompute over the raw bytes
 * (never a re-serialised body), compare in constant time. Several v1 values are accepted, so that a
 * sender may sign with two secrets during a rotation.
 */
export function verifyWebhookSignature(
  secret: string,
  header: string | undefined,
  rawBody: Buffer | string,
  options: VerifyOptions = {},
): VerificationResult {
  const parsed = parseSignatureHeader(header);
  if (!parsed) return { valid: false, reason: 'malformed_header' };
  const tolerance = options.toleranceS ?? DEFAULT_SIGNATURE_TOLERANCE_S;
  const nowS = (options.now ?? Date.now()) / 1000;
  if (Math.abs(nowS - parsed.timestamp) > tolerance) return { valid: false, reason: 'timestamp_out_of_tolerance' };
  const expected = signatureOf(secret, parsed.timestamp, rawBody);
  const matches = parsed.signatures.some((candidate) => candidate.length === expected.length && timingSafeEqual(candidate, expected));
  return matches ? { valid: true, timestamp: parsed.timestamp } : { valid: false, reason: 'signature_mismatch' };
}

function parseSignatureHeader(header: string | undefined): { timestamp: number; signatures: Buffer[] } | undefined {
  if (!header) return undefined;
  let timestamp: number | undefined;
  const signatures: Buffer[] = [];
  for (const part of header.split(',')) {
    const separator = part.indexOf('=');
    if (separator <= 0) return undefined;
    const name = part.slice(0, separator).trim();
    const value = part.slice(separator + 1).trim();
    if (name === 't') {
      if (!/^\d{1,12}$/.test(value) || timestamp !== undefined) return undefined;
      timestamp = Number(value);
    } else if (name === 'v1') {
      if (!/^[0-9a-f]{64}$/i.test(value)) return undefined;
      signatures.push(Buffer.from(value, 'hex'));
    }
    // Other schemes (v0, a future v2) are ignored, as the verification rules only name v1.
  }
  return timestamp === undefined || signatures.length === 0 ? undefined : { timestamp, signatures };
}

/** The three Standard Webhooks headers of a delivery, as the receiver got them. */
export interface StandardWebhookHeaders {
  readonly 'webhook-id'?: string;
  readonly 'webhook-timestamp'?: string;
  readonly 'webhook-signature'?: string;
}

/**
 * Verifies the Standard Webhooks headers (`webhook-signature`: space-separated signatures; during a rotation
 * there are two of each scheme). `key` says which scheme: the 64-hex secret or its `whsec_` form verifies the
 * `v1,<base64>` HMAC values, an endpoint's `whpk_` public key the `v1a,<base64>` Ed25519 ones (docs/webhooks.md
 * "Ed25519 signatures"). The Standard Webhooks libraries verify the same headers; this one needs no dependency.
 */
export function verifyStandardWebhook(
  key: string,
  headers: StandardWebhookHeaders,
  rawBody: Buffer | string,
  options: VerifyOptions = {},
): VerificationResult {
  const id = headers['webhook-id'];
  const timestampText = headers['webhook-timestamp'];
  const signatureText = headers['webhook-signature'];
  if (!id || !timestampText || !/^\d{1,12}$/.test(timestampText) || !signatureText) return { valid: false, reason: 'malformed_header' };
  const asymmetric = key.startsWith(PUBLIC_KEY_PREFIX);
  const scheme = asymmetric ? 'v1a,' : 'v1,';
  const signatures = signatureText
    .split(' ')
    .filter((entry) => entry.startsWith(scheme))
    .map((entry) => Buffer.from(entry.slice(scheme.length), 'base64'));
  if (signatures.length === 0) return { valid: false, reason: 'malformed_header' };
  const timestamp = Number(timestampText);
  const tolerance = options.toleranceS ?? DEFAULT_SIGNATURE_TOLERANCE_S;
  if (Math.abs((options.now ?? Date.now()) / 1000 - timestamp) > tolerance) return { valid: false, reason: 'timestamp_out_of_tolerance' };
  let matches: boolean;
  if (asymmetric) {
    const publicKey = ed25519PublicKey(key);
    matches = signatures.some((candidate) => verifiesAsymmetric(publicKey, id, timestamp, rawBody, candidate));
  } else {
    const secret = key.startsWith('whsec_') ? Buffer.from(key.slice('whsec_'.length), 'base64') : Buffer.from(key, 'utf8');
    const expected = standardSignatureOf(secret, id, timestamp, rawBody);
    matches = signatures.some((candidate) => candidate.length === expected.length && timingSafeEqual(candidate, expected));
  }
  return matches ? { valid: true, timestamp } : { valid: false, reason: 'signature_mismatch' };
}
