import { createHmac, createSecretKey, hkdfSync, timingSafeEqual, type KeyObject } from 'node:crypto';
import { ValidationError } from '../platform/errors.ts';

const MAC_BYTES = 16;

/**
 * Opaque, authenticated cursors of the tree-head history, as the event list's (events/cursor.ts): the text
 * carries the signed_at of the page's last head; the MAC, under a key of its own, also covers the tenant
 * and the window, so a cursor from another tenant, window or endpoint is a 422.
 */
export class TreeHeadCursor {
  private readonly key: KeyObject;

  constructor(pepper: string) {
    this.key = createSecretKey(Buffer.from(hkdfSync('sha256', pepper, 'audit-trail', 'tree-head-cursor-v1', 32)));
  }

  encode(signedAtMs: number, tenantId: string, window: string): string {
    const payload = Buffer.from(`1:${signedAtMs}`).toString('base64url');
    return `${payload}.${this.mac(payload, tenantId, window).toString('base64url')}`;
  }

  decode(cursor: string, tenantId: string, window: string): number {
    const invalid = () => ValidationError.single('cursor', 'is not a cursor issued for this query; start again without it');
    const [payload, macText, ...rest] = cursor.split('.');
    if (!payload || !macText || rest.length > 0) throw invalid();
    const given = Buffer.from(macText, 'base64url');
    const expected = this.mac(payload, tenantId, window);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw invalid();
    const [version, millis] = Buffer.from(payload, 'base64url').toString('utf8').split(':');
    const signedAtMs = Number(millis);
    if (version !== '1' || !Number.isSafeInteger(signedAtMs)) throw invalid();
    return signedAtMs;
  }

  private mac(payload: string, tenantId: string, window: string): Buffer {
    return createHmac('sha256', this.key).update(`${tenantId}\n${window}\n${payload}`).digest().subarray(0, MAC_BYTES);
  }
}
