import type { KeyObject } from 'node:crypto';
import { asymmetricSignatureOf } from './webhookEd25519.ts';
import { signatureOf, standardSignatureOf } from './webhookSignature.ts';

/**
 * Signing a delivery, for a sender: the service's delivery worker and log streams, and the customer CLI's
 * `listen`, which re-signs live events for a local server exactly as deliveries are signed. The schemes and
 * their verification are in webhookSignature.ts; this module only stamps the headers.
 */

/** The endpoint secret's text, or a KeyObject made from its bytes (a sender signing many bodies imports it once). */
export type SigningKey = string | KeyObject;

/**
 * `X-Service-Signature`: `t=<t>,v1=<hex>`, with one v1 per valid secret, the newest first (during a rotation's
 * overlap a receiver holding either secret verifies).
 */
export function signDelivery(secrets: SigningKey | readonly SigningKey[], rawBody: Buffer | string, nowMs = Date.now()): string {
  const timestamp = Math.floor(nowMs / 1000);
  const signatures = keysOf(secrets).map((secret) => `v1=${signatureOf(secret, timestamp, rawBody).toString('hex')}`);
  return `t=${timestamp},${signatures.join(',')}`;
}

/**
 * Every signature header of a delivery: `X-Service-Signature` and the three Standard Webhooks headers
 * (`webhook-id` is the event id, `webhook-signature` one `v1,<base64>` per valid secret and one
 * `v1a,<base64>` per valid Ed25519 key, space-separated, newest first within each scheme), all with one
 * timestamp. Without HMAC secrets (an endpoint signing with Ed25519 alone) there is no X-Service-Signature.
 */
export function signatureHeaders(
  secrets: readonly SigningKey[],
  eventId: string,
  rawBody: Buffer | string,
  nowMs = Date.now(),
  ed25519Keys: readonly KeyObject[] = [],
): Record<string, string> {
  const timestamp = Math.floor(nowMs / 1000);
  const signatures = [
    ...secrets.map((secret) => `v1,${standardSignatureOf(secret, eventId, timestamp, rawBody).toString('base64')}`),
    ...ed25519Keys.map((key) => `v1a,${asymmetricSignatureOf(key, eventId, timestamp, rawBody).toString('base64')}`),
  ];
  const signature = signatures.join(' ');
  if (secrets.length === 0) return { 'webhook-id': eventId, 'webhook-timestamp': String(timestamp), 'webhook-signature': signature };
  return {
    'x-service-signature': signDelivery(secrets, rawBody, nowMs),
    'webhook-id': eventId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signature,
  };
}

function keysOf(secrets: SigningKey | readonly SigningKey[]): readonly SigningKey[] {
  return typeof secrets === 'string' || !Array.isArray(secrets) ? [secrets as SigningKey] : secrets;
}
