import type { KeyObject } from 'node:crypto';
import { signatureOf } from '../client/webhookSignature.ts';

/**
 * Signing a delivery, for the sender. The scheme and its verification live with the customer client
 * (client/webhookSignature.ts), which receivers install; this side only stamps the header.
 */

/** The endpoint secret's text, or a KeyObject made from its bytes (a sender signing many bodies imports it once). */
export type SigningKey = string | KeyObject;

export function signDelivery(secret: SigningKey, rawBody: Buffer | string, nowMs = Date.now()): string {
  const timestamp = Math.floor(nowMs / 1000);
  return `t=${timestamp},v1=${signatureOf(secret, timestamp, rawBody).toString('hex')}`;
}
